// Volumes room: the controller and node calls the volume lifecycle makes. A consumer-side
// interface so the lifecycle is tested with a fake; RouterControllerCalls sends them through the
// agent router (a node with a healthy controller instance of the plugin, serialized per volume).
#pragma once

#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "csi/v1/csi.pb.h"
#include "mooring/v1/nodeagent.pb.h"
#include "services/controlplane/agentclient/agent_result.hpp"

namespace mooring::controlplane::agentclient {
class AgentRouter;
}

namespace mooring::controlplane::volumes {

template <class R>
using Task = boost::asio::awaitable<agentclient::AgentResult<R>>;

class ControllerCalls {
 public:
  virtual ~ControllerCalls() = default;
  // `volume_key` (the Mooring volume id) serializes calls per volume; "" does not serialize.
  virtual Task<::csi::v1::CreateVolumeResponse> create_volume(std::string plugin_id, std::string volume_key,
                                                              ::csi::v1::CreateVolumeRequest request) = 0;
  virtual Task<::csi::v1::DeleteVolumeResponse> delete_volume(std::string plugin_id, std::string volume_key,
                                                              ::csi::v1::DeleteVolumeRequest request) = 0;
  virtual Task<::csi::v1::ControllerExpandVolumeResponse> controller_expand_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerExpandVolumeRequest request) = 0;
  virtual Task<::csi::v1::ControllerModifyVolumeResponse> controller_modify_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerModifyVolumeRequest request) = 0;
  virtual Task<::csi::v1::GetSnapshotResponse> get_snapshot(std::string plugin_id,
                                                            ::csi::v1::GetSnapshotRequest request) = 0;
  // To the claim's node.
  virtual Task<v1::NodeExpandVolumeResponse> node_expand_volume(std::string node_id,
                                                                v1::NodeExpandVolumeRequest request) = 0;
  virtual Task<v1::NodeVolumeStatsResponse> node_volume_stats(std::string node_id,
                                                              v1::NodeVolumeStatsRequest request) = 0;
  virtual Task<::csi::v1::CreateSnapshotResponse> create_snapshot(std::string plugin_id, std::string volume_key,
                                                                  ::csi::v1::CreateSnapshotRequest request) = 0;
  virtual Task<::csi::v1::DeleteSnapshotResponse> delete_snapshot(std::string plugin_id,
                                                                  ::csi::v1::DeleteSnapshotRequest request) = 0;
  virtual Task<::csi::v1::ListSnapshotsResponse> list_snapshots(std::string plugin_id,
                                                                ::csi::v1::ListSnapshotsRequest request) = 0;
  virtual Task<::csi::v1::ListVolumesResponse> list_volumes(std::string plugin_id,
                                                            ::csi::v1::ListVolumesRequest request) = 0;
  virtual Task<::csi::v1::ValidateVolumeCapabilitiesResponse> validate_volume_capabilities(
      std::string plugin_id, std::string volume_key, ::csi::v1::ValidateVolumeCapabilitiesRequest request) = 0;
  // GroupController: a create holds every member volume's lock (`volume_keys`).
  virtual Task<::csi::v1::CreateVolumeGroupSnapshotResponse> create_volume_group_snapshot(
      std::string plugin_id, std::vector<std::string> volume_keys,
      ::csi::v1::CreateVolumeGroupSnapshotRequest request) = 0;
  virtual Task<::csi::v1::DeleteVolumeGroupSnapshotResponse> delete_volume_group_snapshot(
      std::string plugin_id, ::csi::v1::DeleteVolumeGroupSnapshotRequest request) = 0;
  virtual Task<::csi::v1::GetVolumeGroupSnapshotResponse> get_volume_group_snapshot(
      std::string plugin_id, ::csi::v1::GetVolumeGroupSnapshotRequest request) = 0;
};

class RouterControllerCalls final : public ControllerCalls {
 public:
  explicit RouterControllerCalls(agentclient::AgentRouter& router) : router_(router) {}
  Task<::csi::v1::CreateVolumeResponse> create_volume(std::string plugin_id, std::string volume_key,
                                                      ::csi::v1::CreateVolumeRequest request) override;
  Task<::csi::v1::DeleteVolumeResponse> delete_volume(std::string plugin_id, std::string volume_key,
                                                      ::csi::v1::DeleteVolumeRequest request) override;
  Task<::csi::v1::ControllerExpandVolumeResponse> controller_expand_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerExpandVolumeRequest request) override;
  Task<::csi::v1::ControllerModifyVolumeResponse> controller_modify_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerModifyVolumeRequest request) override;
  Task<::csi::v1::GetSnapshotResponse> get_snapshot(std::string plugin_id,
                                                    ::csi::v1::GetSnapshotRequest request) override;
  Task<v1::NodeExpandVolumeResponse> node_expand_volume(std::string node_id,
                                                        v1::NodeExpandVolumeRequest request) override;
  Task<v1::NodeVolumeStatsResponse> node_volume_stats(std::string node_id, v1::NodeVolumeStatsRequest request) override;
  Task<::csi::v1::CreateSnapshotResponse> create_snapshot(std::string plugin_id, std::string volume_key,
                                                          ::csi::v1::CreateSnapshotRequest request) override;
  Task<::csi::v1::DeleteSnapshotResponse> delete_snapshot(std::string plugin_id,
                                                          ::csi::v1::DeleteSnapshotRequest request) override;
  Task<::csi::v1::ListSnapshotsResponse> list_snapshots(std::string plugin_id,
                                                        ::csi::v1::ListSnapshotsRequest request) override;
  Task<::csi::v1::ListVolumesResponse> list_volumes(std::string plugin_id,
                                                    ::csi::v1::ListVolumesRequest request) override;
  Task<::csi::v1::ValidateVolumeCapabilitiesResponse> validate_volume_capabilities(
      std::string plugin_id, std::string volume_key, ::csi::v1::ValidateVolumeCapabilitiesRequest request) override;
  Task<::csi::v1::CreateVolumeGroupSnapshotResponse> create_volume_group_snapshot(
      std::string plugin_id, std::vector<std::string> volume_keys,
      ::csi::v1::CreateVolumeGroupSnapshotRequest request) override;
  Task<::csi::v1::DeleteVolumeGroupSnapshotResponse> delete_volume_group_snapshot(
      std::string plugin_id, ::csi::v1::DeleteVolumeGroupSnapshotRequest request) override;
  Task<::csi::v1::GetVolumeGroupSnapshotResponse> get_volume_group_snapshot(
      std::string plugin_id, ::csi::v1::GetVolumeGroupSnapshotRequest request) override;

 private:
  agentclient::AgentRouter& router_;
};

}  // namespace mooring::controlplane::volumes
