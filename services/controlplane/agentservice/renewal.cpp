// RenewCertificate: an agent renews its own certificate over the mutual-TLS channel its current
// certificate opened, with a CSR for a key it just made (the CA key never goes to the nodes).
// The new certificate is held as pending in the node's identity and becomes the current one
// with the first call the agent makes with it (stage_adopted_renewal, from registration and
// heartbeats); the old one acts a while longer (nodes/node_identity.hpp, kRenewalOverlap).
#include "services/controlplane/agentservice/handlers.hpp"
#include "services/controlplane/nodes/enrollment.hpp"
#include "services/controlplane/nodes/node_identity.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/text.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::controlplane::agentservice {

using domain::in_quotes;

grpc::Status renew_certificate(Context& ctx, const v1::RenewCertificateRequest& req, v1::RenewCertificateResponse& resp,
                               const Caller& caller) {
  const auto& id = req.node_id();
  const std::string who = "node " + in_quotes(id);
  if (auto st = check_id(domain::IdKind::node, id); !st.ok()) return st;
  if (!caller.checked)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "certificate renewal needs mutual TLS: the current certificate is the credential");
  if (ctx.options.renewal_ca.key.empty())
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        "certificate renewal is off: this control plane has no CA key (start it with --tls-ca-key-file)");
  auto csr = tls::inspect_csr(req.csr());
  if (!csr) return invalid_argument(who + ": field \"csr\": " + csr.error());
  if (auto bad = check_csr_names(id, *csr)) return to_status(*bad);
  auto cert =
      tls::sign_csr_with(ctx.options.renewal_ca, req.csr(), node_certificate_request(id, ctx.options.node_cert_ttl));
  if (!cert) {
    ctx.log.error("certificate renewal failed", {{"node_id", id}, {"error", cert.error()}});
    return grpc::Status(grpc::StatusCode::INTERNAL, "cannot sign a certificate for " + who + ": " + cert.error());
  }

  const auto now = domain::now();
  auto identity = identity_of(ctx.store.node_identity(id), id);
  // A node whose certificates were made outside enrollment is pinned from here on: the one that
  // asks acts until the renewal is in use, then for the overlap, and no other one after that.
  if (identity.current.empty()) identity.current = caller.presented;
  const auto renewed = certificate_of(cert->info);
  hold_renewal(identity, renewed);
  const auto generation = identity.generation;
  const auto expires = domain::format_time(renewed.expires);
  Batch batch;
  batch.put(std::move(identity));
  batch.add_event({.time = now,
                   .topic = "Node",
                   .type = "NodeCertificateRenewed",
                   .key = id,
                   .message = "certificate renewed by " + who + " (expires " + expires + ")",
                   .details = {{"serial", renewed.serial},
                               {"key_sha256", renewed.key_sha256},
                               {"generation", std::to_string(generation)},
                               {"expires", expires},
                               {"replaces", caller.presented.serial}}});
  if (auto r = ctx.store.commit(std::move(batch)); !r)
    return write_failed(ctx, "renew the certificate of " + who, r.error());
  ctx.log.info("node certificate renewed", {{"node_id", id}, {"serial", renewed.serial}, {"expires", expires}});
  resp.set_certificate(cert->cert_pem);
  resp.set_ca(cert->ca_pem);
  resp.set_expires_unix_ms(domain::to_unix_ms(renewed.expires));
  resp.set_generation(generation);
  return grpc::Status::OK;
}

void stage_adopted_renewal(Context& ctx, const Caller& caller, Batch& batch) {
  if (!caller.checked || caller.presented.empty()) return;
  const auto* stored = ctx.store.node_identity(caller.node_id);
  if (!stored || stored->pending.serial != caller.presented.serial) return;
  auto identity = *stored;
  if (!adopt_renewal(identity, caller.presented.serial, domain::now())) return;
  ctx.log.info("node uses its renewed certificate", {{"node_id", caller.node_id}, {"serial", caller.presented.serial}});
  batch.put(std::move(identity));
}

}  // namespace mooring::controlplane::agentservice
