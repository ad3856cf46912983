// Node identity: with mutual TLS, a call may act only for the node its certificate names
// (spiffe://mooring/node/<id>). Another node's id in the request, or an allocation placed on
// another node, is PERMISSION_DENIED and logged with the certificate's subject; so is a
// certificate that names no node (the control plane's own, or a CLI's). A certificate that names
// the node but no longer acts for it (expired, replaced by a re-enrollment or a renewal, issued
// before an operator's purge: nodes/node_identity.hpp) is UNAUTHENTICATED, on every call: the
// TLS handshake checked it once, when the connection opened. Without TLS (--insecure) nothing is
// checked. Runs on the store's executor before the handler.
#include <algorithm>

#include "services/controlplane/agentservice/handlers.hpp"
#include "services/controlplane/nodes/enrollment.hpp"
#include "services/controlplane/nodes/node_identity.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/text.hpp"
#include "shared/tls/certificates.hpp"

namespace mooring::controlplane::agentservice {

using domain::in_quotes;

namespace {

grpc::Status denied(Context& ctx, const Caller& caller, std::string_view method, const std::string& why) {
  ctx.log.warn("call refused: the caller's certificate does not allow it",
               {{"method", method}, {"subject", caller.subject}, {"reason", why}});
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, why);
}

// The caller's node, or a refusal when the certificate names none or another one, or no longer
// acts for its node.
grpc::Status same_node(Context& ctx, const Caller& caller, std::string_view method, const std::string& node_id) {
  if (caller.node_id.empty())
    return denied(ctx, caller, method, "certificate " + in_quotes(caller.subject) + " is not a node agent's");
  if (caller.node_id != node_id)
    return denied(ctx, caller, method,
                  "node " + in_quotes(caller.node_id) + " may not act for node " + in_quotes(node_id));
  const auto why = caller.presented.empty()
                       ? std::optional<std::string>("the certificate of node " + in_quotes(node_id) + " cannot be read")
                       : refuse_certificate(node_id, ctx.store.node_identity(node_id), caller.presented, domain::now());
  if (why) {
    ctx.log.warn(
        "call refused: the certificate no longer acts for its node",
        {{"method", method}, {"subject", caller.subject}, {"serial", caller.presented.serial}, {"reason", *why}});
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *why);
  }
  return grpc::Status::OK;
}

grpc::Status own_allocation(Context& ctx, const Caller& caller, std::string_view method, const std::string& alloc_id) {
  const auto* a = ctx.store.allocation(alloc_id);
  if (a && a->node_id != caller.node_id)
    return denied(ctx, caller, method,
                  "allocation " + in_quotes(alloc_id) + " is not placed on node " + in_quotes(caller.node_id));
  return grpc::Status::OK;
}

// Distinct certificates come with enrollments and renewals only; the bound keeps a churn of them
// from growing the cache for ever. It follows the fleet (two per node: a renewal's new one beside
// the old): with a fixed 4096, 5000 nodes heartbeating cleared it every few seconds and each call
// parsed its certificate again (about 1 KB of PEM and 0.2 KB of facts per entry).
constexpr std::size_t kCachedCertificatesAtLeast = 4096;

}  // namespace

const domain::NodeCertificate& presented_certificate(Context& ctx, const std::string& pem) {
  if (auto it = ctx.certificates.find(pem); it != ctx.certificates.end()) return it->second;
  if (ctx.certificates.size() >= std::max(kCachedCertificatesAtLeast, 2 * ctx.store.nodes().size()))
    ctx.certificates.clear();
  domain::NodeCertificate facts;
  if (auto info = tls::inspect(pem)) facts = certificate_of(*info);
  return ctx.certificates.emplace(pem, std::move(facts)).first->second;
}

grpc::Status check_caller(Context& ctx, const Caller& caller, const v1::RegisterNodeRequest& req) {
  return caller.checked ? same_node(ctx, caller, "RegisterNode", req.node_id()) : grpc::Status::OK;
}

grpc::Status check_caller(Context& ctx, const Caller& caller, const v1::HeartbeatRequest& req) {
  return caller.checked ? same_node(ctx, caller, "Heartbeat", req.node_id()) : grpc::Status::OK;
}

grpc::Status check_caller(Context& ctx, const Caller& caller, const v1::WatchAllocationsRequest& req) {
  return caller.checked ? same_node(ctx, caller, "WatchAllocations", req.node_id()) : grpc::Status::OK;
}

grpc::Status check_caller(Context& ctx, const Caller& caller, const v1::UpdateAllocationsRequest& req) {
  if (!caller.checked) return grpc::Status::OK;
  if (auto st = same_node(ctx, caller, "UpdateAllocations", req.node_id()); !st.ok()) return st;
  for (const auto& u : req.updates())
    if (auto st = own_allocation(ctx, caller, "UpdateAllocations", u.alloc_id()); !st.ok()) return st;
  return grpc::Status::OK;
}

grpc::Status check_caller(Context& ctx, const Caller& caller, const v1::ClaimVolumeRequest& req) {
  if (!caller.checked) return grpc::Status::OK;
  if (auto st = same_node(ctx, caller, "ClaimVolume", req.node_id()); !st.ok()) return st;
  return own_allocation(ctx, caller, "ClaimVolume", req.alloc_id());
}

grpc::Status check_caller(Context& ctx, const Caller& caller, const v1::UnpublishVolumeRequest& req) {
  if (!caller.checked) return grpc::Status::OK;
  if (auto st = same_node(ctx, caller, "UnpublishVolume", req.node_id()); !st.ok()) return st;
  return own_allocation(ctx, caller, "UnpublishVolume", req.alloc_id());
}

grpc::Status check_caller(Context& ctx, const Caller& caller, const v1::RenewCertificateRequest& req) {
  return caller.checked ? same_node(ctx, caller, "RenewCertificate", req.node_id()) : grpc::Status::OK;
}

}  // namespace mooring::controlplane::agentservice
