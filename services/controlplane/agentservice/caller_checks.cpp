// Node identity: with mutual TLS, a call may act only for the node its certificate names
// (spiffe://mooring/node/<id>). Another node's id in the request, or an allocation placed on
// another node, is PERMISSION_DENIED and logged with the certificate's subject; so is a
// certificate that names no node (the control plane's own, or a CLI's). Without TLS (--insecure)
// nothing is checked. Runs on the store's executor before the handler.
#include "services/controlplane/agentservice/handlers.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::agentservice {

using domain::in_quotes;

namespace {

grpc::Status denied(Context& ctx, const Caller& caller, std::string_view method, const std::string& why) {
  ctx.log.warn("call refused: the caller's certificate does not allow it",
               {{"method", method}, {"subject", caller.subject}, {"reason", why}});
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, why);
}

// The caller's node, or a refusal when the certificate names none or another one.
grpc::Status same_node(Context& ctx, const Caller& caller, std::string_view method, const std::string& node_id) {
  if (caller.node_id.empty())
    return denied(ctx, caller, method, "certificate " + in_quotes(caller.subject) + " is not a node agent's");
  if (caller.node_id != node_id)
    return denied(ctx, caller, method,
                  "node " + in_quotes(caller.node_id) + " may not act for node " + in_quotes(node_id));
  return grpc::Status::OK;
}

grpc::Status own_allocation(Context& ctx, const Caller& caller, std::string_view method, const std::string& alloc_id) {
  const auto* a = ctx.store.allocation(alloc_id);
  if (a && a->node_id != caller.node_id)
    return denied(ctx, caller, method,
                  "allocation " + in_quotes(alloc_id) + " is not placed on node " + in_quotes(caller.node_id));
  return grpc::Status::OK;
}

}  // namespace

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

}  // namespace mooring::controlplane::agentservice
