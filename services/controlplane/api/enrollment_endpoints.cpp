// POST /v1/node/:id/enroll: node enrollment. The node sends a CSR for a key it made itself and
// gets a certificate for spiffe://mooring/node/<id> signed by the CA, plus the CA; the rule of who
// may is nodes/enrollment.hpp. The CA files are read at each request (rare), so a renewed CA is
// used at once and its key is in memory only while signing.
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/nodes/enrollment.hpp"
#include "shared/domain/time.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::controlplane::api {

namespace {

constexpr int kCertificateDays = 365;

std::string node_name(const std::string& id) { return "node " + nlohmann::json(id).dump(); }

// The CA could not be read or could not sign: the operator's files, not the request.
http::Response cannot_sign(Context& ctx, const std::string& what, const std::string& error) {
  ctx.log.error("node enrollment failed", {{"what", what}, {"error", error}});
  return http::error_response(500, what + ": " + error);
}

}  // namespace

http::Response enroll_node(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::node, id, err)) return err;
  const auto who = node_name(id);
  if (!tls::is_valid_node_id(id))
    return bad_request(who + ": a node named in a certificate needs 1-128 characters of [A-Za-z0-9._-]");
  if (ctx.enrollment_ca.key.empty())
    return http::error_response(501, "node enrollment is off: this control plane has no CA key (start it with "
                                     "--tls-ca-key-file)");
  nlohmann::json body;
  if (!parse_body(req, body, err)) return err;
  if (!body.is_object() || !body.contains("CSR") || !body["CSR"].is_string())
    return bad_request(who + ": field \"CSR\": required, a PEM certificate signing request");
  const auto csr_pem = body["CSR"].get<std::string>();
  auto csr = tls::inspect_csr(csr_pem);
  if (!csr) return bad_request(who + ": field \"CSR\": " + csr.error());
  const EnrollmentRequest request{.node_id = id, .csr = *csr, .management = is_management_request(ctx, req)};
  if (auto refusal = check_enrollment(ctx.store.node(id), request)) return refused(*refusal);

  auto ca = tls::read_pair(ctx.enrollment_ca);
  if (!ca) return cannot_sign(ctx, "cannot read the CA to enroll " + who, ca.error());
  auto cert = tls::sign_csr(*ca, csr_pem, {.identity = {tls::Role::agent, id}, .dns_names = {}, .ip_addresses = {},
                                           .days = kCertificateDays});
  if (!cert) return cannot_sign(ctx, "cannot sign a certificate for " + who, cert.error());
  auto info = tls::inspect(*cert);
  if (!info) return cannot_sign(ctx, "cannot read the certificate signed for " + who, info.error());
  const auto expires = domain::format_time(std::chrono::time_point_cast<std::chrono::milliseconds>(info->not_after));

  // Visible in the event list (who re-keyed a node, and when); never the certificate itself.
  Batch batch;
  batch.add_event(domain::Event{.time = domain::now(),
                                .topic = "Node",
                                .type = "NodeCertificateIssued",
                                .key = id,
                                .message = "certificate issued for " + who + " (expires " + expires + ")",
                                .details = {{"key_sha256", csr->public_key_sha256},
                                            {"expires", expires},
                                            {"by", request.management ? "management token" : "enrollment"}}});
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("record the certificate issued for " + who, index.error());
  auto res = json_ok({{"NodeID", id},
                      {"Certificate", *cert},
                      {"CA", ca->cert_pem},
                      {"Expires", expires},
                      {"CertificateKeySHA256", csr->public_key_sha256}});
  res.index = *index;
  return res;
}

}  // namespace mooring::controlplane::api
