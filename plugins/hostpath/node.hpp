// mooring-hostpath: the CSI Node service logic: stage = bind-mount the volume directory onto the
// staging path, publish = bind-mount staging onto the target (read-only when asked); both undone
// idempotently. Records of what is mounted are persisted (NodeState) before mounting and removed
// after unmounting, so a restarted plugin recognises its own mounts.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

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
  bool stage_without_mount = false;  // see Options::stage_without_mount
  bool volume_mount_group = true;    // see Options::volume_mount_group
  std::string max_volumes_file;      // see Options::max_volumes_file
};

// Exclusive locks on paths, taken all at once (so two callers never deadlock on each other's
// half): mount changes of different volumes run concurrently, calls on one path one at a time.
class PathLocks {
 public:
  class Guard {
   public:
    Guard(PathLocks& owner, std::vector<std::string> paths) : owner_(owner), paths_(std::move(paths)) {}
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    PathLocks& owner_;
    std::vector<std::string> paths_;
  };
  [[nodiscard]] Guard lock(std::vector<std::string> paths);

 private:
  std::mutex mu_;
  std::condition_variable released_;
  std::set<std::string> held_;
};

// A staged block volume is attached when its recorded loop device still shows its backing file
// (node_block.cpp).
bool device_attached(const StagedVolume& staged);

// The target path where `volume_id` is already published (and still mounted) when a publish at
// `target` with access mode `mode` would give a SINGLE_NODE_SINGLE_WRITER volume a second target;
// empty otherwise. (SINGLE_NODE_WRITER stays lenient: older orchestrators use it for several
// workloads on one node.)
std::string published_elsewhere(const NodeRecord& rec, const std::string& volume_id, const std::string& target,
                                int mode);

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
  // Whether this plugin has the volume at all (its directory, or the controller's catalogue):
  // unstage/unpublish of a volume it has not staged or published there are OK only then.
  bool volume_known(const std::string& volume_id) const;
  // NodeGetVolumeStats / NodeExpandVolume: the canonical volume_path when volume_id is staged or
  // published there, else NOT_FOUND (the spec's one error for both).
  grpc::Status give_mount_group(const csi::v1::VolumeCapability& cap, const std::filesystem::path& dir, bool readonly,
                                std::string& group) const;
  grpc::Status find_volume_path(const std::string& volume_id, const std::string& volume_path, std::string& out) const;

  // Block volumes (node_block.cpp), called with the paths' locks held.
  grpc::Status stage_block(const std::string& volume_id, const std::filesystem::path& image, const std::string& staging,
                           bool readonly);
  grpc::Status publish_block(const std::string& volume_id, const StagedVolume& staged, const std::string& staging,
                             const std::string& target, bool readonly, int mode);
  grpc::Status unpublish_block(const PublishedVolume& published, const std::string& target);
  grpc::Status unstage_block(const StagedVolume& staged, const NodeRecord& rec);
  void block_stats(const StagedVolume& staged, const std::string& device, csi::v1::NodeGetVolumeStatsResponse& resp);
  grpc::Status expand_block(const std::string& volume_id, csi::v1::NodeExpandVolumeResponse& resp);

  NodeConfig config_;
  NodeState& state_;
  VolumeStore& store_;
  // Stage and unstage hold their staging path, publish its staging and target paths, unpublish
  // its target: a publish never races the unstage of its staging path, and the records of
  // different volumes are written together (NodeState's group commit) instead of one after
  // another behind a single mutex.
  PathLocks paths_;
};

}  // namespace mooring::hostpath
