// The node agent's volume manager: mounts volumes for allocations and releases them without ever
// making the caller wait on a plugin (seed 004). Mounts run inline (the CSI hook's Prerun awaits
// them); every release runs in its own task of the manager's task group, retried with a capped
// backoff until done, woken early when the volume's plugin becomes healthy again, and followed by
// telling the control plane (also retried). Progress lives in the mount records, so shutdown()
// just cancels and joins, and resume() after a restart finishes what was left.
//
// Not thread-safe: use from the agent's executor (one io_context thread).
#pragma once

#include "services/nodeagent/volumes/mount_record_store.hpp"
#include "services/nodeagent/volumes/mount_table.hpp"
#include "services/nodeagent/volumes/node_plugins.hpp"
#include "services/nodeagent/volumes/volume_operations.hpp"
#include "shared/async/backoff.hpp"
#include "shared/async/task_group.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/volume.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <map>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mooring::async {
class WakeSignal;
}
namespace mooring::v1 {
class VolumeMountInfo;
}

namespace mooring::nodeagent {

// Tells the control plane that the node side of (volume, allocation) is released (the control
// plane link's "unpublished from the node" call). An error is retried with backoff; the function
// must return promptly when the awaiting coroutine is cancelled.
using NotifyUnpublished =
    std::function<boost::asio::awaitable<domain::Status>(const std::string& volume_id, const std::string& alloc_id)>;

struct VolumeManagerOptions {
  std::filesystem::path mount_root;  // staging/ and per-alloc/ live here
  std::filesystem::path state_dir;   // the mount records
  async::Backoff unmount_backoff{.initial = std::chrono::milliseconds(250), .max = std::chrono::seconds(30)};
  async::Backoff notify_backoff{.initial = std::chrono::milliseconds(250), .max = std::chrono::seconds(30)};
  // Notified when the control plane answers again after a silence: telling it about a finished
  // unmount is retried at once. Not owned; may be null.
  async::WakeSignal* controlplane_back = nullptr;
  // Notified after every successful mount: the agent polls the stats of fresh mounts soon after
  // (collect_fresh_stats), so usage shows up without waiting a whole interval. Not owned; may be null.
  async::WakeSignal* mounted = nullptr;
  // Notified after every finished release (its mount record gone): a stopped plugin allocation's
  // instance is deregistered once no record names its plugin. Not owned; may be null.
  async::WakeSignal* released = nullptr;
};

// What a restarted allocation finds for one of its volumes (CSI hook Prerun after a restart).
struct RestoredVolume {
  std::string volume_id;
  std::string path;      // the publish target
  bool mounted = false;  // true: keep using it; false: claim and mount again
  std::string reason;    // why it is not usable, when !mounted
};

// The node-side answer to the control plane's NodeDetachVolume.
struct DetachResult {
  std::string error;  // empty: nothing of the volume (for that allocation) is mounted here any more
  bool ok() const { return error.empty(); }
};

class VolumeManager {
 public:
  // `plugins` and `mounts` must outlive the manager.
  VolumeManager(boost::asio::any_io_executor executor, NodePluginLookup& plugins, const MountTable& mounts,
                NotifyUnpublished notify, VolumeManagerOptions options);
  // co_await shutdown() first: release tasks still running would outlive the manager they use.
  ~VolumeManager();
  VolumeManager(const VolumeManager&) = delete;
  VolumeManager& operator=(const VolumeManager&) = delete;

  // Reads the mount records; call once before anything else.
  domain::Status load();

  // Stages (when the plugin stages and it is not staged yet) and publishes the volume for the
  // allocation; the path to give the task. `request_options` win over the volume's options.
  // `group`: the task's, for a writable volume (VolumeOperations::mount).
  boost::asio::awaitable<MountResult> mount(std::string alloc_id, const ::mooring::v1::VolumeMountInfo& info,
                                            domain::MountOptions request_options = {},
                                            std::optional<uint32_t> group = std::nullopt);
  boost::asio::awaitable<MountResult> mount(std::string alloc_id, domain::VolumeMount volume,
                                            domain::MountOptions request_options = {},
                                            std::optional<uint32_t> group = std::nullopt);

  // One unmount pass now (no retry, no control plane notification): NodeUnpublish, then
  // NodeUnstage when this allocation was the last user. Nothing mounted is ok.
  boost::asio::awaitable<UnmountResult> unmount(std::string alloc_id, std::string volume_id);

  // CSI hook Postrun: returns at once. The release is recorded (the write queued; a restart
  // resumes it, or finds the allocation's Postrun done and releases again), then each volume is
  // unmounted in its own task, retried until done, and the control plane told.
  void release(const std::string& alloc_id, const std::vector<std::string>& volume_ids);
  // Every node plugin's limits read again now (a claim's ControllerPublish hit one; which, the
  // answer does not say).
  void limits_exhausted() { plugins_.limits_exhausted({}); }

  // release() for every volume recorded for the allocation (an allocation found gone or
  // terminal after a restart, whose volume list the caller may not have any more).
  void release_all(const std::string& alloc_id);

  // After a restart: continue every release and every unmount owed by an abandoned mount.
  void resume();

  // After a restart, for an allocation that still runs: which of its recorded volumes are still
  // mounted (keep) and which must be claimed and mounted again (record present, mount gone).
  std::vector<RestoredVolume> restore(const std::string& alloc_id) const;

  // Allocations with volumes recorded mounted (or mounting) and no release yet: the agent
  // releases those whose allocation is gone or terminal after a restart.
  std::vector<std::string> mounted_allocations() const;

  // NodeDetachVolume from the control plane: unmount the volume for one allocation, or every
  // allocation on this node (`alloc_id` empty). One pass each; idempotent; ok when nothing is mounted.
  boost::asio::awaitable<DetachResult> detach(std::string volume_id, std::string alloc_id = {});

  // NodeExpandVolume from the control plane (VolumeOperations::expand), retried as the CSI error
  // table says for up to three attempts: the control plane's own call deadline bounds the rest.
  boost::asio::awaitable<ExpandResult> expand(std::string volume_id, std::string alloc_id, std::string external_id,
                                              ::csi::v1::CapacityRange range,
                                              std::map<std::string, std::string> secrets);

  // NodeGetVolumeStats of every volume published here and in use (VolumeOperations::stats),
  // one volume after the other. The agent polls it every --volume-stats-interval.
  boost::asio::awaitable<std::vector<domain::VolumeStatsReport>> collect_stats();
  // The same for the volumes mounted since the last collection only (those still in use): a
  // burst of mounts costs one call per new volume, not one per volume on the node per mount.
  boost::asio::awaitable<std::vector<domain::VolumeStatsReport>> collect_fresh_stats();
  // The same for one volume (the control plane's NodeVolumeStats); `volume_id` is validated.
  boost::asio::awaitable<std::vector<domain::VolumeStatsReport>> stats_of(std::string volume_id);
  std::size_t fresh_mounts() const { return fresh_.size(); }

  // Cancels every release task and waits up to `grace` for them to stop; never waits on a
  // plugin. True when all stopped. Their progress stays in the records for resume(), every
  // record write asked for before the call on disk when it returns.
  boost::asio::awaitable<bool> shutdown(std::chrono::milliseconds grace = std::chrono::seconds(5));

  std::vector<MountRecord> records() const { return store_.all(); }
  std::size_t record_count() const { return store_.size(); }
  std::size_t releases_in_flight() const { return active_.size(); }
  // Plugin id -> mounts still owed NodeUnpublish/NodeUnstage (phase unmounting), for metrics.
  std::map<std::string, std::size_t> pending_unmounts() const;
  const VolumePaths& paths() const { return ops_.paths(); }

 private:
  using Key = std::pair<std::string, std::string>;  // (alloc, volume)
  void start_release(const std::string& alloc_id, const std::string& volume_id);
  boost::asio::awaitable<void> run_release(std::string alloc_id, std::string volume_id);

  boost::asio::any_io_executor executor_;
  NodePluginLookup& plugins_;
  NotifyUnpublished notify_;
  VolumeManagerOptions options_;
  MountRecordStore store_;
  VolumeOperations ops_;
  std::set<Key> active_;
  std::set<std::string> fresh_;  // volume ids mounted since the last collection
  async::TaskGroup tasks_;       // last: destroyed (and cancelled) first
};

}  // namespace mooring::nodeagent
