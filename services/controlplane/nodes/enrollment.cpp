#include "services/controlplane/nodes/enrollment.hpp"

#include "shared/tls/identity.hpp"

namespace mooring::controlplane {

namespace {

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + quoted(i);
  return out;
}

}  // namespace

tls::CertRequest node_certificate_request(const std::string& node_id, std::chrono::seconds validity) {
  return {.identity = {tls::Role::agent, node_id}, .dns_names = {}, .ip_addresses = {}, .validity = validity};
}

domain::NodeCertificate certificate_of(const tls::CertificateInfo& info) {
  const auto ms = [](std::chrono::system_clock::time_point t) {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(t);
  };
  return {.serial = info.serial,
          .key_sha256 = info.public_key_sha256,
          .issued = ms(tls::issued_at(info)),
          .expires = ms(info.not_after)};
}

Verdict check_csr_names(const std::string& node_id, const tls::CsrInfo& csr) {
  const std::string who = "node " + quoted(node_id);
  const auto uri = tls::identity_uri({tls::Role::agent, node_id});
  for (const auto& u : csr.uris)
    if (u != uri) return invalid(who + ": the CSR asks for " + quoted(u) + "; a node certificate names only " + uri);
  if (!csr.dns_names.empty())
    return invalid(who + ": the CSR asks for DNS names " + joined(csr.dns_names) + "; node certificates carry only " +
                   uri);
  if (!csr.ip_addresses.empty())
    return invalid(who + ": the CSR asks for IP addresses " + joined(csr.ip_addresses) +
                   "; node certificates carry only " + uri);
  if (!csr.other_names.empty())
    return invalid(who + ": the CSR asks for other names " + joined(csr.other_names) +
                   "; node certificates carry only " + uri);
  return std::nullopt;
}

Verdict check_enrollment(const domain::Node* node, const domain::NodeIdentity* identity, const EnrollmentRequest& r,
                         domain::Time now) {
  if (auto bad = check_csr_names(r.node_id, r.csr)) return bad;
  const std::string who = "node " + quoted(r.node_id);
  if (r.management) return std::nullopt;
  const std::string management = "; a management token may re-key it deliberately";
  if (node && node->status != domain::NodeStatus::down)
    return conflict(who + " is live (status " + std::string(domain::to_string(node->status)) +
                    "): its agent renews its own certificate over mutual TLS; to replace the node, stop its agent and "
                    "purge it once it is down" +
                    management);
  const bool pinned = identity && !identity->current.empty();
  const auto expires = pinned ? identity->current.expires : node ? node->certificate_expires : domain::Time{};
  if (domain::is_set(expires) && expires > now)
    return conflict(who + " holds a certificate valid until " + domain::format_time(expires) +
                    (node ? "; purge the node first (an operator's purge revokes its certificates)"
                          : "; enroll it again once that has passed") +
                    management);
  return std::nullopt;
}

}  // namespace mooring::controlplane
