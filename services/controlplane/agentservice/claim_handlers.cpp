// ClaimVolume and UnpublishVolume: protobuf to the claim path's values and back. The claim path
// (claims/claim_path.hpp) records the intent, publishes and classifies the outcome.
#include "services/controlplane/agentservice/handlers.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/text.hpp"
#include "shared/wire/proto_convert.hpp"

namespace mooring::controlplane::agentservice {

namespace asio = boost::asio;

namespace {

// The key of the volume a node names: "ns:id" as the agent records it, or a plain id, which is
// in the allocation's namespace (what an agent sends before its first claim). A volume of another
// namespace than the allocation's is never the allocation's to claim or release.
grpc::Status volume_key_for(const StateStore& store, const std::string& named, const std::string& alloc_id,
                            std::string& key) {
  auto ref = domain::split_volume_key(named);
  if (!ref) return invalid_argument("field \"volume_id\": " + ref.error());
  const auto* alloc = store.allocation(alloc_id);
  const bool qualified = named.find(':') != std::string::npos;
  if (alloc && !qualified) ref->ns = alloc->ns;
  if (alloc && ref->ns != alloc->ns)
    return invalid_argument("volume " + domain::in_quotes(named) + ": allocation " + domain::in_quotes(alloc_id) +
                            " belongs to namespace " + domain::in_quotes(alloc->ns));
  key = domain::volume_key(ref->ns, ref->id);
  return grpc::Status::OK;
}

// The request's ids and modes as domain values, or INVALID_ARGUMENT naming the field.
grpc::Status read_claim(const StateStore& store, const v1::ClaimVolumeRequest& req, ClaimInput& input) {
  if (auto st = check_id(domain::IdKind::allocation, req.alloc_id()); !st.ok()) return st;
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) return st;
  if (auto st = volume_key_for(store, req.volume_id(), req.alloc_id(), input.volume_key); !st.ok()) return st;
  input.allocation_id = req.alloc_id();
  input.node_id = req.node_id();
  const std::string what = claim_subject(input);
  const auto mode = domain::from_proto(req.mode());
  if (!mode) return invalid_argument(what + ": field \"mode\": must be read or write");
  const auto access = domain::from_proto(req.access_mode());
  if (!access)
    return invalid_argument(what + ": field \"access_mode\": unknown value " + std::to_string(req.access_mode()));
  const auto attachment = domain::from_proto(req.attachment_mode());
  if (!attachment)
    return invalid_argument(what + ": field \"attachment_mode\": unknown value " +
                            std::to_string(req.attachment_mode()));
  input.mode = *mode;
  input.access_mode = *access;
  input.attachment_mode = *attachment;
  return grpc::Status::OK;
}

grpc::Status failure_status(const ClaimFailure& failure) {
  if (failure.code) return grpc::Status(*failure.code, failure.refusal.message);
  return to_status(failure.refusal);
}

}  // namespace

asio::awaitable<grpc::Status> claim_volume(Context& ctx, const v1::ClaimVolumeRequest& req,
                                           v1::ClaimVolumeResponse& resp) {
  ClaimInput input;
  if (auto st = read_claim(ctx.store, req, input); !st.ok()) co_return st;
  const ClaimAnswer answer = co_await ctx.claims.claim(std::move(input));
  if (const auto* failure = std::get_if<ClaimFailure>(&answer)) co_return failure_status(*failure);
  const auto& granted = std::get<GrantedClaim>(answer);
  *resp.mutable_volume() = domain::mount_info(granted.volume, granted.claim, granted.read_only);
  co_return grpc::Status::OK;
}

grpc::Status unpublish_volume(Context& ctx, const v1::UnpublishVolumeRequest& req, v1::UnpublishVolumeResponse&) {
  if (auto st = check_id(domain::IdKind::allocation, req.alloc_id()); !st.ok()) return st;
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) return st;
  std::string key;
  if (auto st = volume_key_for(ctx.store, req.volume_id(), req.alloc_id(), key); !st.ok()) return st;
  if (auto refused = ctx.claims.node_detached(key, req.alloc_id(), req.node_id())) return to_status(*refused);
  return grpc::Status::OK;
}

}  // namespace mooring::controlplane::agentservice
