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

Verdict check_enrollment(const domain::Node* node, const EnrollmentRequest& r) {
  const std::string who = "node " + quoted(r.node_id);
  const auto uri = tls::identity_uri({tls::Role::agent, r.node_id});
  for (const auto& u : r.csr.uris)
    if (u != uri) return invalid(who + ": the CSR asks for " + quoted(u) + "; a node certificate names only " + uri);
  if (!r.csr.dns_names.empty())
    return invalid(who + ": the CSR asks for DNS names " + joined(r.csr.dns_names) +
                   "; node certificates carry only " + uri);
  if (!r.csr.ip_addresses.empty())
    return invalid(who + ": the CSR asks for IP addresses " + joined(r.csr.ip_addresses) +
                   "; node certificates carry only " + uri);
  if (!r.csr.other_names.empty())
    return invalid(who + ": the CSR asks for other names " + joined(r.csr.other_names) +
                   "; node certificates carry only " + uri);

  const bool live = node && node->status != domain::NodeStatus::down;
  if (!live || r.management) return std::nullopt;
  if (node->certificate_key_sha256.empty())
    return conflict(who + " is live and its certificate's key is not known yet (it has not called over mutual TLS "
                          "since this control plane started recording keys); enroll with a management token, or "
                          "once the node is down");
  if (node->certificate_key_sha256 != r.csr.public_key_sha256)
    return conflict(who + " is live with a certificate for another key; renew with the key it holds, enroll with a "
                          "management token to re-key it, or wait until the node is down");
  return std::nullopt;
}

}  // namespace mooring::controlplane
