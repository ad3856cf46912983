// mooring-hostpath: the CSI Node service logic: stage = bind-mount the volume directory onto the
// staging path, publish = bind-mount staging onto the target (read-only when asked); both undone
// idempotently. Records of what is mounted are persisted (NodeState) before mounting and removed
// after unmounting, so a restarted plugin recognises its own mounts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

#include <grpcpp/support/status.h>

#include "csi/v1/csi.pb.h"
#include "plugins/hostpath/node_state.hpp"

namespace mooring::hostpath {

class VolumeStore;

struct NodeConfig {
  std::filesystem::path data_dir;
  std::string node_id;
  std::int64_t max_volumes = 0;
  std::map<std::string, std::string> topology;
};

class Node {
 public:
  // store: the shared controller catalogue, used for capacities in stats (may be absent from disk).
  Node(NodeConfig config, NodeState& state, VolumeStore& store)
      : config_(std::move(config)), state_(state), store_(store) {}

  grpc::Status stage(const csi::v1::NodeStageVolumeRequest& req);
  grpc::Status unstage(const csi::v1::NodeUnstageVolumeRequest& req);
  grpc::Status publish(const csi::v1::NodePublishVolumeRequest& req);
  grpc::Status unpublish(const csi::v1::NodeUnpublishVolumeRequest& req);
  grpc::Status volume_stats(const csi::v1::NodeGetVolumeStatsRequest& req, csi::v1::NodeGetVolumeStatsResponse& resp);
  grpc::Status expand(const csi::v1::NodeExpandVolumeRequest& req, csi::v1::NodeExpandVolumeResponse& resp);
  grpc::Status get_capabilities(csi::v1::NodeGetCapabilitiesResponse& resp);
  grpc::Status get_info(csi::v1::NodeGetInfoResponse& resp);

  // Where a volume's directory lives: volume_context["path"] (set by CreateVolume, so a node plugin
  // in a split deployment finds it), else <data-dir>/volumes/<volume_id>.
  grpc::Status volume_source(const std::string& volume_id, const google::protobuf::Map<std::string, std::string>& ctx,
                             std::filesystem::path& out) const;

 private:
  NodeConfig config_;
  NodeState& state_;
  VolumeStore& store_;
  std::mutex mu_;  // one mount change at a time on this node; mounts are quick
};

}  // namespace mooring::hostpath
