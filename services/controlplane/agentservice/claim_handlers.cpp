// ClaimVolume and UnpublishVolume: protobuf to the claim path's values and back. The claim path
// (claims/claim_path.hpp) records the intent, publishes and classifies the outcome.
#include "services/controlplane/agentservice/handlers.hpp"
#include "shared/wire/proto_convert.hpp"

namespace mooring::controlplane::agentservice {

namespace asio = boost::asio;

namespace {

// The request's ids and modes as domain values, or INVALID_ARGUMENT naming the field.
grpc::Status read_claim(const v1::ClaimVolumeRequest& req, ClaimInput& input) {
  if (auto st = check_id(domain::IdKind::volume, req.volume_id()); !st.ok()) return st;
  if (auto st = check_id(domain::IdKind::allocation, req.alloc_id()); !st.ok()) return st;
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) return st;
  input.volume_id = req.volume_id();
  input.allocation_id = req.alloc_id();
  input.node_id = req.node_id();
  const std::string what = claim_subject(input);
  const auto mode = domain::from_proto(req.mode());
  if (!mode) return invalid_argument(what + ": field \"mode\": must be read or write");
  const auto access = domain::from_proto(req.access_mode());
  if (!access) return invalid_argument(what + ": field \"access_mode\": unknown value " + std::to_string(req.access_mode()));
  const auto attachment = domain::from_proto(req.attachment_mode());
  if (!attachment)
    return invalid_argument(what + ": field \"attachment_mode\": unknown value " + std::to_string(req.attachment_mode()));
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
  if (auto st = read_claim(req, input); !st.ok()) co_return st;
  const ClaimAnswer answer = co_await ctx.claims.claim(std::move(input));
  if (const auto* failure = std::get_if<ClaimFailure>(&answer)) co_return failure_status(*failure);
  const auto& granted = std::get<GrantedClaim>(answer);
  *resp.mutable_volume() = domain::mount_info(granted.volume, granted.claim, granted.read_only);
  co_return grpc::Status::OK;
}

grpc::Status unpublish_volume(Context& ctx, const v1::UnpublishVolumeRequest& req, v1::UnpublishVolumeResponse&) {
  if (auto st = check_id(domain::IdKind::volume, req.volume_id()); !st.ok()) return st;
  if (auto st = check_id(domain::IdKind::allocation, req.alloc_id()); !st.ok()) return st;
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) return st;
  if (auto refused = ctx.claims.node_detached(req.volume_id(), req.alloc_id(), req.node_id()))
    return to_status(*refused);
  return grpc::Status::OK;
}

}  // namespace mooring::controlplane::agentservice
