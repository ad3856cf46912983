#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"

namespace mooring::controlplane::volumes {

// Each call hands its arguments on: the router owns timeouts, retries across instances and the
// per-volume serialization.
Task<::csi::v1::CreateVolumeResponse> RouterControllerCalls::create_volume(std::string plugin_id, std::string key,
                                                                           ::csi::v1::CreateVolumeRequest request) {
  return router_.create_volume(std::move(plugin_id), std::move(key), std::move(request));
}

Task<::csi::v1::DeleteVolumeResponse> RouterControllerCalls::delete_volume(std::string plugin_id, std::string key,
                                                                           ::csi::v1::DeleteVolumeRequest request) {
  return router_.delete_volume(std::move(plugin_id), std::move(key), std::move(request));
}

Task<::csi::v1::ControllerExpandVolumeResponse> RouterControllerCalls::controller_expand_volume(
    std::string plugin_id, std::string key, ::csi::v1::ControllerExpandVolumeRequest request) {
  return router_.controller_expand_volume(std::move(plugin_id), std::move(key), std::move(request));
}

Task<::csi::v1::ControllerModifyVolumeResponse> RouterControllerCalls::controller_modify_volume(
    std::string plugin_id, std::string key, ::csi::v1::ControllerModifyVolumeRequest request) {
  return router_.controller_modify_volume(std::move(plugin_id), std::move(key), std::move(request));
}

Task<::csi::v1::GetSnapshotResponse> RouterControllerCalls::get_snapshot(std::string plugin_id,
                                                                         ::csi::v1::GetSnapshotRequest request) {
  return router_.get_snapshot(std::move(plugin_id), std::move(request));
}

Task<v1::NodeExpandVolumeResponse> RouterControllerCalls::node_expand_volume(std::string node_id,
                                                                             v1::NodeExpandVolumeRequest request) {
  return router_.node_expand_volume(std::move(node_id), std::move(request));
}

Task<v1::NodeVolumeStatsResponse> RouterControllerCalls::node_volume_stats(std::string node_id,
                                                                           v1::NodeVolumeStatsRequest request) {
  return router_.node_volume_stats(std::move(node_id), std::move(request));
}

Task<::csi::v1::CreateSnapshotResponse> RouterControllerCalls::create_snapshot(
    std::string plugin_id, std::string key, ::csi::v1::CreateSnapshotRequest request) {
  return router_.create_snapshot(std::move(plugin_id), std::move(key), std::move(request));
}

Task<::csi::v1::DeleteSnapshotResponse> RouterControllerCalls::delete_snapshot(
    std::string plugin_id, ::csi::v1::DeleteSnapshotRequest request) {
  return router_.delete_snapshot(std::move(plugin_id), std::move(request));
}

Task<::csi::v1::ListSnapshotsResponse> RouterControllerCalls::list_snapshots(std::string plugin_id,
                                                                             ::csi::v1::ListSnapshotsRequest request) {
  return router_.list_snapshots(std::move(plugin_id), std::move(request));
}

Task<::csi::v1::ListVolumesResponse> RouterControllerCalls::list_volumes(std::string plugin_id,
                                                                         ::csi::v1::ListVolumesRequest request) {
  return router_.list_volumes(std::move(plugin_id), std::move(request));
}

Task<::csi::v1::ValidateVolumeCapabilitiesResponse> RouterControllerCalls::validate_volume_capabilities(
    std::string plugin_id, std::string key, ::csi::v1::ValidateVolumeCapabilitiesRequest request) {
  return router_.validate_volume_capabilities(std::move(plugin_id), std::move(key), std::move(request));
}

Task<::csi::v1::CreateVolumeGroupSnapshotResponse> RouterControllerCalls::create_volume_group_snapshot(
    std::string plugin_id, std::vector<std::string> keys, ::csi::v1::CreateVolumeGroupSnapshotRequest request) {
  return router_.create_volume_group_snapshot(std::move(plugin_id), std::move(keys), std::move(request));
}

Task<::csi::v1::DeleteVolumeGroupSnapshotResponse> RouterControllerCalls::delete_volume_group_snapshot(
    std::string plugin_id, ::csi::v1::DeleteVolumeGroupSnapshotRequest request) {
  return router_.delete_volume_group_snapshot(std::move(plugin_id), std::move(request));
}

Task<::csi::v1::GetVolumeGroupSnapshotResponse> RouterControllerCalls::get_volume_group_snapshot(
    std::string plugin_id, ::csi::v1::GetVolumeGroupSnapshotRequest request) {
  return router_.get_volume_group_snapshot(std::move(plugin_id), std::move(request));
}

}  // namespace mooring::controlplane::volumes
