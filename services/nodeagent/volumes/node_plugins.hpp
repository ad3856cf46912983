// What the volume manager needs from the node's CSI plugins, seen from the consumer side (Nomad's
// VolumeMounter split): the node RPCs of a plugin instance (the four of a mount, expansion and
// stats), whether it stages, and a signal
// for "this plugin is healthy again" that early-wakes retrying unmounts. The agent wires it to the
// plugin registry and fingerprinter (plugins/plugin_manager.hpp); unit tests use a fake.
#pragma once

#include "shared/rpc/csi_client.hpp"

#include <memory>
#include <optional>
#include <string>

namespace mooring::async {
class WakeSignal;
}

namespace mooring::nodeagent {

// The node-service calls one plugin instance answers. Failures are CsiResult values.
class NodeVolumeCalls {
 public:
  virtual ~NodeVolumeCalls() = default;
  virtual rpc::CsiClient::Call<::csi::v1::NodeStageVolumeResponse> stage(
      const ::csi::v1::NodeStageVolumeRequest& request) = 0;
  virtual rpc::CsiClient::Call<::csi::v1::NodeUnstageVolumeResponse> unstage(
      const ::csi::v1::NodeUnstageVolumeRequest& request) = 0;
  virtual rpc::CsiClient::Call<::csi::v1::NodePublishVolumeResponse> publish(
      const ::csi::v1::NodePublishVolumeRequest& request) = 0;
  virtual rpc::CsiClient::Call<::csi::v1::NodeUnpublishVolumeResponse> unpublish(
      const ::csi::v1::NodeUnpublishVolumeRequest& request) = 0;
  virtual rpc::CsiClient::Call<::csi::v1::NodeExpandVolumeResponse> expand(
      const ::csi::v1::NodeExpandVolumeRequest& request) = 0;
  virtual rpc::CsiClient::Call<::csi::v1::NodeGetVolumeStatsResponse> stats(
      const ::csi::v1::NodeGetVolumeStatsRequest& request) = 0;
};

// A running node plugin. `calls` is shared so a call in flight keeps the client alive even if
// the plugin is replaced meanwhile.
struct NodePlugin {
  std::shared_ptr<NodeVolumeCalls> calls;
  bool requires_stage = false;        // NodeGetCapabilities: STAGE_UNSTAGE_VOLUME
  bool supports_expand = false;       // NodeGetCapabilities: EXPAND_VOLUME
  bool supports_stats = false;        // GET_VOLUME_STATS: NodeGetVolumeStats is only sent then
  bool supports_condition = false;    // VOLUME_CONDITION: its answer's condition is only read then
  bool supports_mount_group = false;  // VOLUME_MOUNT_GROUP: NodeStage/NodePublish carry the task's group
};

class NodePluginLookup {
 public:
  virtual ~NodePluginLookup() = default;
  // nullopt: no node plugin with this id runs (healthy) on this node right now.
  virtual std::optional<NodePlugin> find(const std::string& plugin_id) = 0;
  // Notified whenever the plugin (re)becomes healthy. Valid as long as the lookup, also for
  // plugins that are not running yet.
  virtual async::WakeSignal& healthy_again(const std::string& plugin_id) = 0;
  // The plugin answered RESOURCE_EXHAUSTED (empty id: a claim's ControllerPublish did, for some
  // plugin): its limits, the max volumes of NodeGetInfo, are read again now.
  virtual void limits_exhausted(const std::string& plugin_id) = 0;
};

}  // namespace mooring::nodeagent
