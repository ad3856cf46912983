// The CSI steps of one mount or one unmount pass for (allocation, volume), each under that
// volume's lock and with the mount record written around every RPC: the intent before, the result
// after. Single attempts, no background work: the volume manager adds the retries and tasks.
//
// Mount: NodeStage only when the plugin stages and the staging path is not already staged (record
// and mount table agree), then NodePublish unless already published; the external id is the CSI
// volume id; publish context, secrets and volume context are passed on; the capability comes from
// the modes and the merged mount options (the request wins). A step that fails is abandoned: an
// uncertain publish/stage is negated at once, and what cannot be negated stays recorded
// (`cleanup_owed`) for a background unmount.
// Unmount: NodeUnpublish, then NodeUnstage only when no other allocation holds the staging path;
// NOT_FOUND / "already unmounted" is done.
// Expand: NodeExpandVolume on a published volume, under the same lock, when the plugin can.
// Stats: NodeGetVolumeStats of each publication, under the same lock, when the plugin can.
//
// Not thread-safe: use from the agent's executor.
#pragma once

#include "services/nodeagent/volumes/mount_record_store.hpp"
#include "services/nodeagent/volumes/mount_table.hpp"
#include "services/nodeagent/volumes/node_plugins.hpp"
#include "shared/async/keyed_locks.hpp"
#include "services/nodeagent/volumes/volume_paths.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/domain/volume.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mooring::nodeagent {

struct MountResult {
  std::string path;           // the publish target, on success
  std::string error;          // empty on success; names the volume, allocation, RPC and status
  bool retryable = false;     // worth trying the mount again later (plugin away, timeout, ...)
  bool cleanup_owed = false;  // the negating calls did not all succeed: an unmount must be retried
  bool ok() const { return error.empty(); }
};

struct ExpandResult {
  std::int64_t capacity_bytes = 0;               // the plugin's answer (0: not reported)
  grpc::StatusCode code = grpc::StatusCode::OK;  // what to answer the control plane
  std::string error;                             // empty on success; names the volume and the reason
  bool retryable = false;                        // the CSI error table says try again
  bool ok() const { return error.empty(); }
};

struct UnmountResult {
  std::string error;      // empty when nothing of the record may be mounted any more
  std::string plugin_id;  // the plugin the unmount needs (to wait for it), when known
  bool ok() const { return error.empty(); }
};

class VolumeOperations {
 public:
  VolumeOperations(boost::asio::any_io_executor executor, VolumePaths paths, MountRecordStore& store,
                   NodePluginLookup& plugins, const MountTable& mounts);

  // `group`: a non-root task's group (none for root or plugin tasks). A writable file-system
  // volume gets it: through NodeStage/NodePublish's volume_mount_group when the node plugin
  // advertises VOLUME_MOUNT_GROUP, else from the agent under the options' GroupChangePolicy.
  boost::asio::awaitable<MountResult> mount(std::string alloc_id, domain::VolumeMount volume,
                                            domain::MountOptions request_options,
                                            std::optional<uint32_t> group = std::nullopt);

  // One pass. Nothing recorded for (alloc, volume), or node side already clean: ok. On success
  // the record is removed, or kept in phase `unmounted` when the control plane is still to be told.
  boost::asio::awaitable<UnmountResult> unmount(std::string alloc_id, std::string volume_id);

  // NodeExpandVolume for the volume published here (for `alloc_id`, or the first allocation that
  // has it mounted when empty), under the volume's lock like every other node call. NOT_FOUND
  // when it is not published here; FAILED_PRECONDITION when the node plugin does not advertise
  // EXPAND_VOLUME. One attempt.
  boost::asio::awaitable<ExpandResult> expand(std::string volume_id, std::string alloc_id, std::string external_id,
                                              ::csi::v1::CapacityRange range,
                                              std::map<std::string, std::string> secrets);

  // NodeGetVolumeStats for every allocation that has the volume published here, under the
  // volume's lock like every other node call (a stats call never overlaps a mount or an unmount;
  // a record being unmounted is skipped). Nothing when the node plugin does not advertise
  // GET_VOLUME_STATS or is not running; the condition only when it advertises VOLUME_CONDITION.
  // A failed call is logged and leaves that allocation out (the next poll is the retry).
  boost::asio::awaitable<std::vector<domain::VolumeStatsReport>> stats(std::string volume_id);

  // Removes the record of a finished release (after the control plane was told); refuses a
  // record that is not `unmounted`.
  boost::asio::awaitable<domain::Status> forget(std::string alloc_id, std::string volume_id);

  async::KeyedLocks& locks() { return locks_; }
  const VolumePaths& paths() const { return paths_; }
  MountRecordStore& store() { return store_; }
  const MountTable& mounts() const { return mounts_; }

 private:
  struct Failure {
    std::string error;
    bool retryable = false;
  };

  // Unpublish / unstage what `record` may still have mounted; the caller holds the lock and
  // writes the record afterwards (success or failure): this writes nothing itself.
  // VolumePaths' directory work on the store's worker thread (mkdir and rmdir wait on the disk).
  boost::asio::awaitable<domain::Status> ensure_dir(std::filesystem::path dir);
  void remove_empty(std::filesystem::path dir);
  boost::asio::awaitable<std::optional<Failure>> unmount_locked(MountRecord& record,
                                                                const std::optional<NodePlugin>& plugin);
  // A failed stage/publish: negate what may exist and report.
  boost::asio::awaitable<MountResult> abandon(MountRecord& record, const std::optional<NodePlugin>& plugin,
                                              std::string error, bool retryable);
  bool others_hold_staging(const MountRecord& record) const;
  // RESOURCE_EXHAUSTED from NodeStage/NodePublish: the plugin's max volumes may have dropped, so
  // its limits are read again now (NodePluginLookup::limits_exhausted).
  void note_exhausted(const grpc::Status& status, const std::string& plugin_id) {
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) plugins_.limits_exhausted(plugin_id);
  }
  // mount()'s steps: whether to stage now (its intent set in `record`), then the CSI calls.
  boost::asio::awaitable<domain::Expected<bool>> plan_stage(MountRecord& record, bool requires_stage,
                                                            const std::filesystem::path& staging);
  boost::asio::awaitable<std::optional<MountResult>> stage_and_publish(MountRecord& record,
                                                                       const std::optional<NodePlugin>& plugin,
                                                                       const domain::VolumeMount& volume,
                                                                       const ::csi::v1::VolumeCapability& capability,
                                                                       bool stage_now, const std::string& what);
  // The agent's side of a published volume's group (the plugin's when `by_plugin`), on the
  // store's worker: what the record keeps as its ownership.
  boost::asio::awaitable<domain::Expected<domain::VolumeOwnership>> give_group(const MountRecord& record,
                                                                               uint32_t group, bool by_plugin,
                                                                               domain::GroupChangePolicy policy);

  VolumePaths paths_;
  MountRecordStore& store_;
  NodePluginLookup& plugins_;
  const MountTable& mounts_;
  async::KeyedLocks locks_;
};

}  // namespace mooring::nodeagent
