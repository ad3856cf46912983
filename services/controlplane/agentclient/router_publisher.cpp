#include "services/controlplane/agentclient/router_publisher.hpp"

#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/claims/operation_id.hpp"
#include "shared/wire/volume_capability.hpp"

namespace mooring::controlplane::agentclient {

boost::asio::awaitable<PublishResult> RouterPublisher::publish(const domain::Volume& volume, const domain::Claim& claim,
                                                               std::string csi_node_id) {
  PublishResult out;
  auto capability = domain::csi_volume_capability(claim.access_mode, claim.attachment_mode, volume.mount_options);
  if (!capability) {
    // Nothing was sent: the claim is dropped and the caller sees why.
    out.sent = false;
    out.status =
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "volume \"" + volume.id + "\": " + capability.error());
    co_return out;
  }
  ::csi::v1::ControllerPublishVolumeRequest req;
  req.set_volume_id(volume.external_id);  // the provider's id (seed 001)
  req.set_node_id(csi_node_id);           // the CSI node id, not ours (seed 001)
  *req.mutable_volume_capability() = std::move(*capability);
  req.set_readonly(claim.mode == domain::ClaimMode::read);
  for (const auto& [k, v] : volume.secrets) (*req.mutable_secrets())[k] = v;
  for (const auto& [k, v] : volume.context) (*req.mutable_volume_context())[k] = v;
  std::string plugin_id = volume.plugin_id, key = domain::volume_key(volume.ns, volume.id);
  std::string operation = publish_operation_id(key, claim.allocation_id, claim);
  auto res = co_await router_.controller_publish_volume(std::move(plugin_id), std::move(key), std::move(req),
                                                        std::move(operation));
  out.sent = !res.no_target;
  out.unreached = res.unreached;
  out.uncertain_earlier = res.uncertain_earlier;
  if (res.ok()) {
    out.status = grpc::Status::OK;
    out.publish_context.insert(res.response.publish_context().begin(), res.response.publish_context().end());
  } else {
    out.status = grpc::Status(res.status.error_code(), res.error);
  }
  co_return out;
}

}  // namespace mooring::controlplane::agentclient
