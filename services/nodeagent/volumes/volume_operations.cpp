#include "services/nodeagent/volumes/volume_operations.hpp"

#include "csi/v1/csi.pb.h"
#include "shared/async/cancelled.hpp"
#include "shared/csi/error_table.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/wire/volume_capability.hpp"
#include "shared/log/log.hpp"
#include "shared/mounts/volume_group.hpp"

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace mooring::nodeagent {

namespace asio = boost::asio;

namespace {

const log::Logger kLog{"volumes"};

template <class Result>
std::string describe(csi::Rpc rpc, const Result& r) {
  return std::string(csi::to_string(rpc)) + " failed with " + csi::status_text(r.status) + " (" +
         std::string(csi::to_string(r.outcome)) + ")";
}

std::string not_running(const std::string& plugin_id) {
  return "node plugin \"" + plugin_id + "\" is not running on this node";
}

void fill(google::protobuf::Map<std::string, std::string>& out, const domain::StringMap& in) {
  for (const auto& [k, v] : in) out[k] = v;
}

// The fields NodeStageVolume and NodePublishVolume share (the CSI spec gives both the same).
template <class Request>
void fill_volume(Request& request, const domain::VolumeMount& volume, const ::csi::v1::VolumeCapability& capability) {
  request.set_volume_id(volume.external_id);
  fill(*request.mutable_publish_context(), volume.publish_context);
  *request.mutable_volume_capability() = capability;
  fill(*request.mutable_secrets(), volume.secrets);
  fill(*request.mutable_volume_context(), volume.volume_context);
}

// A mount driven (again): what the volume is now, written with the first intent.
void start_mounting(MountRecord& record, const std::string& alloc_id, const domain::VolumeMount& volume,
                    const std::string& usage, const std::filesystem::path& target) {
  record.alloc_id = alloc_id;
  record.volume_id = volume.volume_id;
  record.usage = usage;
  record.plugin_id = volume.plugin_id;
  record.external_id = volume.external_id;
  record.read_only = volume.read_only;
  record.access_mode = volume.access_mode;
  record.attachment_mode = volume.attachment_mode;
  record.target_path = target.string();
  record.phase = MountPhase::mounting;
}

}  // namespace

VolumeOperations::VolumeOperations(asio::any_io_executor executor, VolumePaths paths, MountRecordStore& store,
                                   NodePluginLookup& plugins, const MountTable& mounts)
    : paths_(std::move(paths)), store_(store), plugins_(plugins), mounts_(mounts), locks_(std::move(executor)) {}

bool VolumeOperations::others_hold_staging(const MountRecord& record) const {
  for (const auto& other : store_.for_volume(record.volume_id)) {
    if (other.alloc_id != record.alloc_id && other.usage == record.usage && other.staged != StepState::none) {
      return true;
    }
  }
  return false;
}

asio::awaitable<MountResult> VolumeOperations::mount(std::string alloc_id, domain::VolumeMount volume,
                                                     domain::MountOptions request_options,
                                                     std::optional<uint32_t> group) {
  const std::string what = "volume \"" + volume.volume_id + "\" for allocation \"" + alloc_id + "\"";
  auto fail = [&](const std::string& message, bool retryable) {
    return MountResult{.error = what + ": " + message, .retryable = retryable};
  };
  if (volume.plugin_id.empty()) co_return fail("no plugin id", false);
  if (volume.external_id.empty()) co_return fail("no external id", false);
  const std::string usage = volume_usage(volume.read_only, volume.attachment_mode, volume.access_mode);
  auto target = paths_.publish(alloc_id, volume.volume_id, usage);
  if (!target) co_return fail(target.error(), false);
  auto staging = paths_.staging(volume.volume_id, usage);
  if (!staging) co_return fail(staging.error(), false);
  const auto options = domain::merge_mount_options(volume.mount_options, request_options);
  auto capability = domain::csi_volume_capability(volume.access_mode, volume.attachment_mode, options);
  if (!capability) co_return fail(capability.error(), false);

  auto guard = co_await locks_.lock(volume.volume_id);
  auto plugin = plugins_.find(volume.plugin_id);
  if (!plugin) co_return fail(not_running(volume.plugin_id), true);
  // A read-only claim stays as it is; a block device has no files to own.
  if (volume.read_only || !capability->has_mount()) group.reset();
  const bool group_by_plugin = group && plugin->supports_mount_group;
  if (group_by_plugin) capability->mutable_mount()->set_volume_mount_group(std::to_string(*group));

  MountRecord record;
  if (auto existing = store_.get(alloc_id, volume.volume_id)) {
    record = *existing;
    if (record.notify || record.phase == MountPhase::unmounting || record.phase == MountPhase::unmounted) {
      co_return fail("is being unmounted (released)", !record.notify);
    }
    if (record.usage != usage) co_return fail("already mounted as " + record.usage + ", not " + usage, false);
    if (record.phase == MountPhase::mounted && record.published == StepState::done &&
        mounts_.is_mounted(record.target_path)) {
      co_return MountResult{.path = record.target_path};
    }
    // An interrupted mount, or one gone since (agent restart, node reboot): drive it again; the
    // CSI calls are idempotent.
  }
  start_mounting(record, alloc_id, volume, usage, *target);

  // Each durable write carries the intent of the next call (mounting + stage intent; staged +
  // publish intent; published), so a crash anywhere leaves a record of what may be mounted.
  auto stage_now = co_await plan_stage(record, plugin->requires_stage, *staging);
  if (!stage_now) co_return fail(stage_now.error(), true);
  if (auto s = co_await store_.put(record); !s) co_return fail("cannot record the mount: " + s.error(), true);

  if (auto failed = co_await stage_and_publish(record, plugin, volume, *capability, *stage_now, what))
    co_return std::move(*failed);
  record.published = StepState::done;
  if (group) {
    auto owned = co_await give_group(record, *group, group_by_plugin, options.group_change_policy);
    if (!owned) co_return co_await abandon(record, plugin, what + ": " + owned.error(), false);
    record.ownership = *owned;
  }
  record.phase = MountPhase::mounted;
  record.last_error.clear();
  // Queued: until it lands the record says "publish pending", which a restart treats as a mount
  // that may exist (and checks), so the task need not wait for it.
  store_.submit(record);
  kLog.info("volume mounted", {{"volume", record.volume_id},
                               {"alloc", alloc_id},
                               {"plugin", record.plugin_id},
                               {"path", record.target_path},
                               {"staged", plugin->requires_stage},
                               {"volume_mount_group", group_by_plugin ? std::to_string(*group) : std::string()}});
  co_return MountResult{.path = record.target_path};
}

// Whether NodeStageVolume is to be called now (its intent then set in `record`).
asio::awaitable<domain::Expected<bool>> VolumeOperations::plan_stage(MountRecord& record, bool requires_stage,
                                                                     const std::filesystem::path& staging) {
  if (!requires_stage) co_return false;
  record.staging_path = staging.string();
  // Staged is what the plugin answered, not what the kernel shows: NodeStageVolume MAY mount
  // nothing at the staging path (the upstream host-path driver stages nothing). A record (this
  // one, or another allocation's of the same usage) that holds a done stage means it is staged,
  // so a mount driven again after its target was lost only publishes again. Should the plugin
  // have lost the stage too (a reboot), its NodePublishVolume answers FAILED_PRECONDITION, the
  // failed mount is undone (unstaged) and the claim's retry stages afresh.
  bool already = record.staged == StepState::done;
  for (const auto& other : store_.for_volume(record.volume_id)) {
    if (other.alloc_id != record.alloc_id && other.usage == record.usage && other.staged == StepState::done)
      already = true;
  }
  if (already) {
    record.staged = StepState::done;  // holds a use of the staging path
  } else {
    if (auto s = co_await ensure_dir(staging); !s) co_return domain::error(s.error());
    record.staged = StepState::pending;  // intent first: a crash during the RPC owes an unstage
    co_return true;
  }
  co_return false;
}

// NodeStageVolume when `stage_now`, then NodePublishVolume, each intent recorded first. A failure
// is abandoned (what may exist negated) and returned.
asio::awaitable<std::optional<MountResult>> VolumeOperations::stage_and_publish(
    MountRecord& record, const std::optional<NodePlugin>& plugin, const domain::VolumeMount& volume,
    const ::csi::v1::VolumeCapability& capability, bool stage_now, const std::string& what) {
  if (stage_now) {
    ::csi::v1::NodeStageVolumeRequest request;
    fill_volume(request, volume, capability);
    request.set_staging_target_path(record.staging_path);
    auto r = co_await plugin->calls->stage(request);
    note_exhausted(r.status, record.plugin_id);
    if (!r.done()) {
      if (r.outcome != csi::Outcome::uncertain) record.staged = StepState::none;
      co_return co_await abandon(record, plugin, what + ": " + describe(csi::Rpc::NodeStageVolume, r),
                                 csi::should_retry(r.outcome));
    }
    record.staged = StepState::done;  // written with the publish intent
  }

  if (auto s = co_await ensure_dir(std::filesystem::path(record.target_path).parent_path()); !s) {
    co_return co_await abandon(record, plugin, what + ": " + s.error(), true);
  }
  record.published = StepState::pending;
  if (auto s = co_await store_.put(record); !s) {
    record.published = StepState::none;
    co_return co_await abandon(record, plugin, what + ": cannot record the publish intent: " + s.error(), true);
  }
  ::csi::v1::NodePublishVolumeRequest request;
  fill_volume(request, volume, capability);
  if (plugin->requires_stage) request.set_staging_target_path(record.staging_path);
  request.set_target_path(record.target_path);
  request.set_readonly(volume.read_only);
  auto r = co_await plugin->calls->publish(request);
  note_exhausted(r.status, record.plugin_id);
  if (!r.done()) {
    if (r.outcome != csi::Outcome::uncertain) record.published = StepState::none;
    co_return co_await abandon(record, plugin, what + ": " + describe(csi::Rpc::NodePublishVolume, r),
                               csi::should_retry(r.outcome));
  }
  co_return std::nullopt;
}

asio::awaitable<domain::Expected<domain::VolumeOwnership>> VolumeOperations::give_group(
    const MountRecord& record, uint32_t group, bool by_plugin, domain::GroupChangePolicy policy) {
  if (policy == domain::GroupChangePolicy::unset) policy = domain::GroupChangePolicy::on_root_mismatch;
  const std::string by = by_plugin ? "VOLUME_MOUNT_GROUP" : std::string(domain::to_string(policy));
  // Done at this mount before (an interrupted mount driven again, a remount after a restart):
  // not walked again, unless the policy says Always.
  if (record.ownership && record.ownership->group == group && record.ownership->by == by &&
      policy != domain::GroupChangePolicy::always)
    co_return *record.ownership;
  domain::VolumeOwnership out{.group = group, .by = by, .walked = false, .update_time = domain::now()};
  if (by_plugin || policy == domain::GroupChangePolicy::none) co_return out;
  mounts::GroupChange changed;
  co_await store_.worker().run([&] {
    changed = mounts::give_tree_to_group(record.target_path, group, policy == domain::GroupChangePolicy::always);
  });
  if (!changed.error.empty())
    co_return domain::error("cannot give the volume group " + std::to_string(group) + ": " + changed.error);
  out.walked = changed.walked;
  kLog.info("volume given the task's group", {{"volume", record.volume_id},
                                              {"alloc", record.alloc_id},
                                              {"group", static_cast<int64_t>(group)},
                                              {"policy", by},
                                              {"walked", changed.walked}});
  co_return out;
}

asio::awaitable<MountResult> VolumeOperations::abandon(MountRecord& record, const std::optional<NodePlugin>& plugin,
                                                       std::string error, bool retryable) {
  kLog.warn("mount failed; undoing what it may have mounted",
            {{"volume", record.volume_id}, {"alloc", record.alloc_id}, {"error", error}});
  record.last_error = error;
  // A cancelled mount (the allocation is going away, or the agent is stopping) cannot await the
  // negating calls; the record keeps what is owed and a background unmount (or resume) does it.
  const auto cancellation = co_await asio::this_coro::cancellation_state;
  if (!async::is_cancelled(cancellation)) {
    if (auto failure = co_await unmount_locked(record, plugin)) record.last_error = error + "; undo: " + failure->error;
  }
  const auto stored = store_.get(record.alloc_id, record.volume_id);
  const bool notify = record.notify || (stored && stored->notify);
  if (record.clean() && !notify) {
    if (auto s = co_await store_.remove(record.alloc_id, record.volume_id); s) {
      co_return MountResult{.error = std::move(error), .retryable = retryable};
    }
  }
  record.phase = record.clean() ? MountPhase::unmounted : MountPhase::unmounting;
  if (auto s = co_await store_.put(record); !s) kLog.error("cannot record an abandoned mount", {{"error", s.error()}});
  co_return MountResult{.error = std::move(error), .retryable = retryable, .cleanup_owed = true};
}

asio::awaitable<domain::Status> VolumeOperations::ensure_dir(std::filesystem::path dir) {
  domain::Status made;
  co_await store_.worker().run([&] { made = paths_.ensure_dir(dir); });
  co_return made;
}

void VolumeOperations::remove_empty(std::filesystem::path dir) {
  // Queued, not awaited: nothing needs the directories gone, and a later ensure_dir() of the same
  // path runs after it on the same thread.
  store_.worker().submit([paths = paths_, dir = std::move(dir)] { paths.remove_empty(dir); });
}

asio::awaitable<std::optional<VolumeOperations::Failure>> VolumeOperations::unmount_locked(
    MountRecord& record, const std::optional<NodePlugin>& plugin) {
  using R = std::optional<Failure>;
  if (record.published != StepState::none) {
    if (!plugin) co_return R{Failure{not_running(record.plugin_id), true}};
    ::csi::v1::NodeUnpublishVolumeRequest request;
    request.set_volume_id(record.external_id);
    request.set_target_path(record.target_path);
    auto r = co_await plugin->calls->unpublish(request);
    if (!r.done()) co_return R{Failure{describe(csi::Rpc::NodeUnpublishVolume, r), true}};
    // Trust the kernel over the answer: a record is only dropped for a path that is really free.
    if (mounts_.is_mounted(record.target_path)) {
      co_return R{Failure{"NodeUnpublishVolume answered OK but " + record.target_path + " is still mounted", true}};
    }
    // Not written yet: the caller writes the record once (the final state, or the failure). A
    // crash before that repeats NodeUnpublishVolume, which is idempotent.
    record.published = StepState::none;
    remove_empty(record.target_path);
  }
  if (record.staged != StepState::none) {
    if (!others_hold_staging(record)) {
      if (!plugin) co_return R{Failure{not_running(record.plugin_id), true}};
      ::csi::v1::NodeUnstageVolumeRequest request;
      request.set_volume_id(record.external_id);
      request.set_staging_target_path(record.staging_path);
      auto r = co_await plugin->calls->unstage(request);
      if (!r.done()) co_return R{Failure{describe(csi::Rpc::NodeUnstageVolume, r), true}};
      if (mounts_.is_mounted(record.staging_path)) {
        co_return R{Failure{"NodeUnstageVolume answered OK but " + record.staging_path + " is still mounted", true}};
      }
      remove_empty(record.staging_path);
    }
    // With other users left this record just drops its use: the last one unstages. Written by
    // the caller, as above.
    record.staged = StepState::none;
  }
  co_return R{};
}

asio::awaitable<UnmountResult> VolumeOperations::unmount(std::string alloc_id, std::string volume_id) {
  auto guard = co_await locks_.lock(volume_id);
  auto existing = store_.get(alloc_id, volume_id);
  if (!existing) co_return UnmountResult{};
  MountRecord record = *existing;
  if (record.phase == MountPhase::unmounted) co_return UnmountResult{.plugin_id = record.plugin_id};
  if (record.phase != MountPhase::unmounting) {
    record.phase = MountPhase::unmounting;
    if (record.notify) {
      // A release: its record (written, or queued ahead of this write) already tells a restarted
      // agent to finish it whatever the phase, so the RPC need not wait for this write.
      store_.submit(record);
    } else if (auto s = co_await store_.put(record); !s) {
      co_return UnmountResult{.error = "cannot record the unmount: " + s.error(), .plugin_id = record.plugin_id};
    }
  }
  auto failure = co_await unmount_locked(record, plugins_.find(record.plugin_id));
  if (failure) {
    record.last_error = failure->error;
    ++record.unmount_attempts;
    // Queued, not awaited: nothing waits on this note, and a caller being cancelled (shutdown
    // interrupting the RPC) could not await it; the store writes it before it goes.
    store_.submit(record);
    co_return UnmountResult{
        .error = "volume \"" + volume_id + "\" of allocation \"" + alloc_id + "\": " + failure->error,
        .plugin_id = record.plugin_id};
  }
  record.last_error.clear();
  const auto stored = store_.get(alloc_id, volume_id);
  if (stored && stored->notify) {
    // The control plane is still to be told. Queued: telling it before this write lands is safe
    // (the node side is free; after a crash the unmount is repeated, and is idempotent).
    record.phase = MountPhase::unmounted;
    store_.submit(record);
  } else if (auto s = co_await store_.remove(alloc_id, volume_id); !s) {
    co_return UnmountResult{.error = "cannot remove the mount record: " + s.error(), .plugin_id = record.plugin_id};
  }
  kLog.info("volume unmounted", {{"volume", volume_id}, {"alloc", alloc_id}, {"plugin", record.plugin_id}});
  co_return UnmountResult{.plugin_id = record.plugin_id};
}

asio::awaitable<ExpandResult> VolumeOperations::expand(std::string volume_id, std::string alloc_id,
                                                       std::string external_id, ::csi::v1::CapacityRange range,
                                                       std::map<std::string, std::string> secrets) {
  const std::string what = "volume \"" + volume_id + "\"";
  auto guard = co_await locks_.lock(volume_id);
  std::optional<MountRecord> record;
  for (const auto& r : store_.for_volume(volume_id)) {
    if (r.phase != MountPhase::mounted || r.published != StepState::done) continue;
    if (!alloc_id.empty() && r.alloc_id != alloc_id) continue;
    record = r;
    break;
  }
  if (!record)
    co_return ExpandResult{.code = grpc::StatusCode::NOT_FOUND,
                           .error = what + " is not published on this node" +
                                    (alloc_id.empty() ? std::string{} : " for allocation \"" + alloc_id + "\"")};
  auto plugin = plugins_.find(record->plugin_id);
  if (!plugin)
    co_return ExpandResult{.code = grpc::StatusCode::UNAVAILABLE,
                           .error = what + ": " + not_running(record->plugin_id),
                           .retryable = true};
  if (!plugin->supports_expand)
    co_return ExpandResult{.code = grpc::StatusCode::FAILED_PRECONDITION,
                           .error = what + ": plugin \"" + record->plugin_id +
                                    "\" does not advertise EXPAND_VOLUME on its node service; it cannot grow the "
                                    "volume on the node"};
  ::csi::v1::NodeExpandVolumeRequest request;
  request.set_volume_id(external_id.empty() ? record->external_id : external_id);
  request.set_volume_path(record->target_path);
  if (plugin->requires_stage) request.set_staging_target_path(record->staging_path);
  *request.mutable_capacity_range() = std::move(range);
  // The mount options are not part of the record; the capability's shape (access and attachment)
  // is what the plugin needs to tell a block device from a filesystem.
  if (auto capability = domain::csi_volume_capability(record->access_mode, record->attachment_mode, {}))
    *request.mutable_volume_capability() = *capability;
  fill(*request.mutable_secrets(), secrets);
  auto result = co_await plugin->calls->expand(request);
  if (!result.ok())
    co_return ExpandResult{.code = result.status.error_code(),
                           .error = what + ": NodeExpandVolume failed: " + csi::status_text(result.status),
                           .retryable = csi::should_retry(result.outcome)};
  kLog.info("volume expanded on the node",
            {{"volume", volume_id}, {"alloc", record->alloc_id}, {"capacity", result.response.capacity_bytes()}});
  co_return ExpandResult{.capacity_bytes = result.response.capacity_bytes()};
}

asio::awaitable<std::vector<domain::VolumeStatsReport>> VolumeOperations::stats(std::string volume_id) {
  std::vector<domain::VolumeStatsReport> out;
  auto guard = co_await locks_.lock(volume_id);
  for (const auto& record : store_.for_volume(volume_id)) {
    // Released (or being released): the unmount waiting for this lock comes first in spirit.
    if (record.notify || record.phase != MountPhase::mounted || record.published != StepState::done) continue;
    auto plugin = plugins_.find(record.plugin_id);
    if (record.ownership && (!plugin || !plugin->supports_stats)) {
      out.push_back({.volume_id = volume_id, .alloc_id = record.alloc_id, .ownership = record.ownership});
      continue;
    }
    if (!plugin || !plugin->supports_stats) continue;
    ::csi::v1::NodeGetVolumeStatsRequest request;
    request.set_volume_id(record.external_id);
    request.set_volume_path(record.target_path);
    if (plugin->requires_stage) request.set_staging_target_path(record.staging_path);
    auto result = co_await plugin->calls->stats(request);
    if (!result.ok()) {
      kLog.warn("NodeGetVolumeStats failed; the next poll tries again",
                {{"volume", volume_id}, {"alloc", record.alloc_id}, {"error", csi::status_text(result.status)}});
      continue;
    }
    const auto now = domain::now();
    domain::VolumeStatsReport report{
        .volume_id = volume_id, .alloc_id = record.alloc_id, .ownership = record.ownership};
    for (const auto& u : result.response.usage()) {
      if (!report.usage) report.usage = domain::VolumeUsage{.update_time = now};
      if (u.unit() == ::csi::v1::VolumeUsage::BYTES) {
        report.usage->bytes_available = u.available();
        report.usage->bytes_total = u.total();
        report.usage->bytes_used = u.used();
      } else if (u.unit() == ::csi::v1::VolumeUsage::INODES) {
        report.usage->inodes_available = u.available();
        report.usage->inodes_total = u.total();
        report.usage->inodes_used = u.used();
      }
    }
    if (plugin->supports_condition && result.response.has_volume_condition())
      report.condition = domain::VolumeCondition{result.response.volume_condition().abnormal(),
                                                 result.response.volume_condition().message(), now};
    if (report.usage || report.condition || report.ownership) out.push_back(std::move(report));
  }
  co_return out;
}

asio::awaitable<domain::Status> VolumeOperations::forget(std::string alloc_id, std::string volume_id) {
  auto guard = co_await locks_.lock(volume_id);
  auto record = store_.get(alloc_id, volume_id);
  if (!record) co_return domain::Status{};
  if (record->phase != MountPhase::unmounted || !record->clean()) {
    co_return domain::error(
        "volume "
        " + volume_id + "
        " of allocation "
        " + alloc_id + "
        " is " +
        std::string(to_string(record->phase)) + ", not unmounted");
  }
  co_return co_await store_.remove(alloc_id, volume_id);
}

}  // namespace mooring::nodeagent
