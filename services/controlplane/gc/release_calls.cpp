#include "services/controlplane/gc/release_calls.hpp"

#include "services/controlplane/agentclient/agent_router.hpp"
#include "shared/domain/volume.hpp"
#include "shared/wire/proto_convert.hpp"

namespace mooring::controlplane::gc {

Call<v1::NodeDetachVolumeResponse> RouterReleaseCalls::node_detach_volume(std::string node_id,
                                                                          v1::NodeDetachVolumeRequest request) {
  return router_.node_detach_volume(std::move(node_id), std::move(request));
}

Call<::csi::v1::ControllerUnpublishVolumeResponse> RouterReleaseCalls::controller_unpublish_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::ControllerUnpublishVolumeRequest request,
    std::string operation_id) {
  return router_.controller_unpublish_volume(std::move(plugin_id), std::move(volume_key), std::move(request),
                                             std::move(operation_id));
}

Call<::csi::v1::ControllerGetVolumeResponse> RouterReleaseCalls::controller_get_volume(
    std::string plugin_id, std::string volume_key, ::csi::v1::ControllerGetVolumeRequest request) {
  return router_.controller_get_volume(std::move(plugin_id), std::move(volume_key), std::move(request));
}

Call<::csi::v1::ListVolumesResponse> RouterReleaseCalls::list_volumes(std::string plugin_id,
                                                                      ::csi::v1::ListVolumesRequest request) {
  return router_.list_volumes(std::move(plugin_id), std::move(request));
}

v1::NodeDetachVolumeRequest node_detach_request(const std::string& volume_key, const domain::Volume& v,
                                                const domain::Claim& claim) {
  v1::NodeDetachVolumeRequest req;
  req.set_plugin_id(v.plugin_id);
  req.set_volume_id(volume_key);
  req.set_external_id(v.external_id);
  req.set_alloc_id(claim.allocation_id);
  req.set_access_mode(domain::to_proto(claim.access_mode));
  req.set_attachment_mode(domain::to_proto(claim.attachment_mode));
  req.set_read_only(claim.mode == domain::ClaimMode::read);
  return req;
}

::csi::v1::ControllerUnpublishVolumeRequest controller_unpublish_request(const domain::Volume& v,
                                                                         const std::string& external_node_id) {
  ::csi::v1::ControllerUnpublishVolumeRequest req;
  req.set_volume_id(v.external_id);
  req.set_node_id(external_node_id);
  for (const auto& [k, val] : v.secrets) (*req.mutable_secrets())[k] = val;
  return req;
}

}  // namespace mooring::controlplane::gc
