// Node identity over REST: introduction tokens (POST /v1/node/:id/intro), node enrollment (POST
// /v1/node/:id/enroll) and the identity record (GET /v1/node/:id/identity). The node sends a CSR
// for a key it made itself and gets a certificate for spiffe://mooring/node/<id> signed by the CA,
// plus the CA; who may is nodes/enrollment.hpp, which certificate acts afterwards
// nodes/node_identity.hpp. The CA files are read at each signing (rare), so a renewed CA is used
// at once and its key is in memory only while signing.
#include "services/controlplane/acl/secret.hpp"
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/nodes/enrollment.hpp"
#include "services/controlplane/nodes/node_identity.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/time.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::controlplane::api {

namespace {

std::string node_name(const std::string& id) { return "node " + nlohmann::json(id).dump(); }

// The node id of the path, valid as the name a certificate carries; `err` is the 400 otherwise.
bool certificate_node_id(const http::Request& req, std::string& id, http::Response& err) {
  if (!path_id(req, "id", domain::IdKind::node, id, err)) return false;
  if (tls::is_valid_node_id(id)) return true;
  err = bad_request(node_name(id) + ": a node named in a certificate needs 1-128 characters of [A-Za-z0-9._-]");
  return false;
}

// The ACL token that asks, by name ("" without one or with ACLs off): who made an introduction.
std::string asking_token_name(Context& ctx, const http::Request& req) {
  if (!ctx.acl_enabled) return {};
  const auto c = request_caller(ctx, req);
  return c && !c->accessor.empty() ? c->name : std::string();
}

// The CA could not be read or could not sign: the operator's files, not the request.
http::Response cannot_sign(Context& ctx, const std::string& who, const std::string& error) {
  ctx.log.error("node enrollment failed", {{"node", who}, {"error", error}});
  return http::error_response(500, "cannot sign a certificate for " + who + ": " + error);
}

// Who asks to enroll: a management token (re-key), or an introduction token for this node (its
// position in the node's record). A refusal is 401 (no token, unknown, expired, used) or 403
// (another node's), naming why.
struct Enroller {
  bool management = false;
  IntroductionCheck introduction;
};
std::optional<http::Response> enroller(Context& ctx, const http::Request& req, const nlohmann::json& body,
                                       const std::string& id, domain::Time now, Enroller& out) {
  const auto who = node_name(id);
  out.management = is_management_request(ctx, req);
  if (out.management) return std::nullopt;
  if (body.contains("IntroToken") && !body["IntroToken"].is_string())
    return bad_request(who + ": field \"IntroToken\": must be a string");
  const auto token = body.value("IntroToken", std::string());
  if (token.empty())
    return http::error_response(401, who +
                                         ": enrollment needs an introduction token made for the node (field "
                                         "\"IntroToken\"; mooring node intro create -node-id " +
                                         id + ") or a management token");
  out.introduction = check_introduction(ctx.store.node_identities(), id, acl::secret_hash(token), now);
  if (out.introduction.status != 0)
    return http::error_response(out.introduction.status, who + ": " + out.introduction.why);
  return std::nullopt;
}

// The other nodes' records without their expired introductions (nodes/node_identity.hpp,
// prune_introductions), in the batch that writes `except`'s; one left with nothing is erased.
void prune_others(const StateStore& store, Batch& batch, const std::string& except, domain::Time now) {
  for (const auto& [node_id, stored] : store.node_identities()) {
    if (node_id == except) continue;
    auto identity = stored;
    switch (prune_introductions(identity, now)) {
      case Pruned::unchanged: break;
      case Pruned::changed: batch.put(std::move(identity)); break;
      case Pruned::remove: batch.erase_node_identity(node_id); break;
    }
  }
}

}  // namespace

http::Response create_node_introduction(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!certificate_node_id(req, id, err)) return err;
  const auto who = node_name(id);
  nlohmann::json body = nlohmann::json::object();
  if (!req.body.empty() && !parse_body(req, body, err)) return err;
  if (!body.is_object()) return bad_request(who + ": the body must be a JSON object like {\"TTL\": \"1h\"}");
  for (const auto& [key, value] : body.items())
    if (key != "TTL") return bad_request(who + ": unknown field \"" + key + "\" (only \"TTL\")");
  if (body.contains("TTL") && !body["TTL"].is_string())
    return bad_request(who + ": field \"TTL\": must be a string like \"1h\"");
  auto ttl = introduction_ttl(body.value("TTL", std::string()));
  if (!ttl) return bad_request(who + ": " + ttl.error());

  const auto now = domain::now();
  const auto secret = acl::random_uuid();
  domain::Introduction intro{.accessor_id = acl::random_uuid(),
                             .secret_hash = acl::secret_hash(secret),
                             .created_by = asking_token_name(ctx, req),
                             .create_time = now,
                             .expiration_time = now + *ttl};
  auto identity = identity_of(ctx.store.node_identity(id), id);
  add_introduction(identity, intro, now);
  Batch batch;
  batch.put(std::move(identity));
  prune_others(ctx.store, batch, id, now);
  // The event names the token by its accessor, never its secret.
  batch.add_event({.time = now,
                   .topic = "Node",
                   .type = "NodeIntroductionCreated",
                   .key = id,
                   .message = "introduction token " + intro.accessor_id + " made for " + who + " (expires " +
                              domain::format_time(intro.expiration_time) + ")",
                   .details = {{"accessor_id", intro.accessor_id},
                               {"expires", domain::format_time(intro.expiration_time)},
                               {"created_by", intro.created_by}}});
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("record an introduction token for " + who, index.error());
  auto res = json_ok({{"NodeID", id},
                      {"AccessorID", intro.accessor_id},
                      {"SecretID", secret},
                      {"ExpirationTime", domain::format_time(intro.expiration_time)}});
  res.index = *index;
  return res;
}

http::Response enroll_node(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!certificate_node_id(req, id, err)) return err;
  const auto who = node_name(id);
  if (ctx.enrollment_ca.key.empty())
    return http::error_response(501,
                                "node enrollment is off: this control plane has no CA key (start it with "
                                "--tls-ca-key-file)");
  nlohmann::json body;
  if (!parse_body(req, body, err)) return err;
  if (!body.is_object()) return bad_request(who + ": the body must be a JSON object with \"CSR\"");
  const auto now = domain::now();
  Enroller by;
  if (auto refused_by = enroller(ctx, req, body, id, now, by)) return *refused_by;
  if (!body.contains("CSR") || !body["CSR"].is_string())
    return bad_request(who + ": field \"CSR\": required, a PEM certificate signing request");
  const auto csr_pem = body["CSR"].get<std::string>();
  auto csr = tls::inspect_csr(csr_pem);
  if (!csr) return bad_request(who + ": field \"CSR\": " + csr.error());
  const EnrollmentRequest request{.node_id = id, .csr = *csr, .management = by.management};
  if (auto refusal = check_enrollment(ctx.store.node(id), ctx.store.node_identity(id), request, now))
    return refused(*refusal);

  auto cert = tls::sign_csr_with(ctx.enrollment_ca, csr_pem, node_certificate_request(id, ctx.node_cert_ttl));
  if (!cert) return cannot_sign(ctx, who, cert.error());
  auto identity = identity_of(ctx.store.node_identity(id), id);
  std::string asked_by = "management token", intro_accessor;
  if (!by.management) {
    auto& intro = identity.introductions.at(by.introduction.index);
    intro.used_time = now;
    intro_accessor = intro.accessor_id;
    asked_by = "introduction token " + intro_accessor;
  }
  pin_enrolled(identity, certificate_of(cert->info));
  prune_introductions(identity, now);
  const auto pinned = identity.current;
  const auto generation = identity.generation;
  const auto expires = domain::format_time(pinned.expires);
  Batch batch;
  batch.put(std::move(identity));
  prune_others(ctx.store, batch, id, now);
  // Visible in the event list (who enrolled or re-keyed a node, and when); never the certificate.
  batch.add_event(domain::Event{.time = now,
                                .topic = "Node",
                                .type = "NodeCertificateIssued",
                                .key = id,
                                .message = "certificate issued for " + who + " (expires " + expires + ")",
                                .details = {{"key_sha256", pinned.key_sha256},
                                            {"serial", pinned.serial},
                                            {"generation", std::to_string(generation)},
                                            {"expires", expires},
                                            {"by", asked_by}}});
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("record the certificate issued for " + who, index.error());
  nlohmann::json answer{{"NodeID", id},
                        {"Certificate", cert->cert_pem},
                        {"CA", cert->ca_pem},
                        {"Expires", expires},
                        {"Serial", pinned.serial},
                        {"Generation", generation},
                        {"CertificateKeySHA256", pinned.key_sha256}};
  // Which introduction was used (its accessor, never its secret): the audit line names it.
  if (!intro_accessor.empty()) answer["IntroductionAccessorID"] = intro_accessor;
  auto res = json_ok(answer);
  res.index = *index;
  return res;
}

http::Response get_node_identity(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::node, id, err)) return err;
  const auto* identity = ctx.store.node_identity(id);
  if (!identity) return not_found("node identity", id);
  return json_ok(domain::to_api_json(*identity));
}

}  // namespace mooring::controlplane::api
