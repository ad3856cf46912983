#include "services/nodeagent/volumes/volume_manager.hpp"

#include "mooring/v1/types.pb.h"
#include "shared/async/retry.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/domain/ids.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/log/log.hpp"

#include <boost/asio/use_awaitable.hpp>

namespace mooring::nodeagent {

namespace asio = boost::asio;

namespace {
const log::Logger kLog{"volume-manager"};

bool in_use(const MountRecord& r) {
  return !r.notify && (r.phase == MountPhase::mounting || r.phase == MountPhase::mounted);
}
}  // namespace

VolumeManager::VolumeManager(asio::any_io_executor executor, NodePluginLookup& plugins, const MountTable& mounts,
                             NotifyUnpublished notify, VolumeManagerOptions options)
    : executor_(executor),
      plugins_(plugins),
      notify_(std::move(notify)),
      options_(std::move(options)),
      store_(options_.state_dir),
      ops_(executor, VolumePaths(options_.mount_root), store_, plugins, mounts),
      tasks_(executor, "volume-releases") {}

VolumeManager::~VolumeManager() {
  if (tasks_.size() > 0) {
    kLog.error("volume manager destroyed with releases still running; call shutdown() first",
               {{"running", tasks_.size()}});
  }
}

domain::Status VolumeManager::load() { return store_.load(); }

asio::awaitable<MountResult> VolumeManager::mount(std::string alloc_id, const ::mooring::v1::VolumeMountInfo& info,
                                                  domain::MountOptions request_options, std::optional<uint32_t> group) {
  auto volume = domain::from_proto(info);
  if (!volume) co_return MountResult{.error = volume.error()};
  co_return co_await mount(std::move(alloc_id), std::move(*volume), std::move(request_options), group);
}

asio::awaitable<MountResult> VolumeManager::mount(std::string alloc_id, domain::VolumeMount volume,
                                                  domain::MountOptions request_options, std::optional<uint32_t> group) {
  const std::string volume_id = volume.volume_id;
  auto result = co_await ops_.mount(alloc_id, std::move(volume), std::move(request_options), group);
  // The negating calls of a failed mount did not all succeed: retry them in the background.
  if (result.cleanup_owed) start_release(alloc_id, volume_id);
  if (result.ok()) {
    fresh_.insert(volume_id);
    if (options_.mounted) options_.mounted->notify();
  }
  co_return result;
}

asio::awaitable<UnmountResult> VolumeManager::unmount(std::string alloc_id, std::string volume_id) {
  co_return co_await ops_.unmount(std::move(alloc_id), std::move(volume_id));
}

void VolumeManager::release(const std::string& alloc_id, const std::vector<std::string>& volume_ids) {
  for (const auto& volume_id : volume_ids) {
    auto existing = store_.get(alloc_id, volume_id);
    MountRecord record;
    if (existing) {
      record = *existing;
    } else {
      // Nothing mounted here (never mounted, or a failed mount fully undone): the control plane
      // still needs to hear that the node side is released, and durably so.
      record.alloc_id = alloc_id;
      record.volume_id = volume_id;
      record.phase = MountPhase::unmounted;
    }
    if (!record.notify) {
      record.notify = true;
      // Queued, not awaited: Postrun never waits on a disk.
      store_.submit(record);
    }
    start_release(alloc_id, volume_id);
  }
}

void VolumeManager::release_all(const std::string& alloc_id) {
  std::vector<std::string> volume_ids;
  for (const auto& record : store_.for_alloc(alloc_id)) volume_ids.push_back(record.volume_id);
  release(alloc_id, volume_ids);
}

void VolumeManager::resume() {
  for (const auto& record : store_.all()) {
    if (record.notify || record.phase == MountPhase::unmounting || record.phase == MountPhase::unmounted) {
      start_release(record.alloc_id, record.volume_id);
    }
  }
}

void VolumeManager::start_release(const std::string& alloc_id, const std::string& volume_id) {
  Key key{alloc_id, volume_id};
  if (active_.contains(key)) return;  // the running task re-reads the record before it ends
  if (tasks_.cancelled()) return;     // shutting down: resume() after the restart continues
  active_.insert(key);
  const bool started = tasks_.spawn("release volume " + volume_id + " of allocation " + alloc_id,
                                    [this, alloc_id, volume_id]() { return run_release(alloc_id, volume_id); });
  if (!started) active_.erase(key);
}

asio::awaitable<void> VolumeManager::run_release(std::string alloc_id, std::string volume_id) {
  // Leaves the active set on every way out (done, cancelled, exception). The record is read again
  // after the unmount, so a release() that arrives while this task runs (and so starts none) is
  // still told to the control plane.
  struct Active {
    std::set<Key>& set;
    Key key;
    ~Active() { set.erase(key); }
  } active{active_, {alloc_id, volume_id}};

  auto record = store_.get(alloc_id, volume_id);
  if (!record) co_return;
  const std::string plugin_id = record->plugin_id;

  async::RetryOptions unmount_options;
  unmount_options.backoff = options_.unmount_backoff;
  if (!plugin_id.empty()) unmount_options.wake = &plugins_.healthy_again(plugin_id);
  unmount_options.on_retry = [&](const async::RetryEvent& e) {
    kLog.warn("unmount failed; retrying", {{"volume", volume_id},
                                           {"alloc", alloc_id},
                                           {"plugin", plugin_id},
                                           {"attempt", e.attempt},
                                           {"delay", e.delay},
                                           {"error", e.error}});
  };
  auto unmounted = co_await async::retry(
      [&](unsigned) -> asio::awaitable<async::Attempt> {
        auto r = co_await ops_.unmount(alloc_id, volume_id);
        co_return r.ok() ? async::Attempt::ok() : async::Attempt::again(r.error);
      },
      unmount_options);
  if (!unmounted.ok()) {
    kLog.info("release stopped; it resumes after a restart",
              {{"volume", volume_id}, {"alloc", alloc_id}, {"end", async::to_string(unmounted.end)}});
    co_return;
  }

  record = store_.get(alloc_id, volume_id);
  if (!record) {  // no release asked for: the record went with the unmount
    if (options_.released) options_.released->notify();
    co_return;
  }
  if (record->notify && notify_) {
    async::RetryOptions notify_options;
    notify_options.backoff = options_.notify_backoff;
    notify_options.wake = options_.controlplane_back;
    notify_options.on_retry = [&](const async::RetryEvent& e) {
      kLog.warn("telling the control plane failed; retrying",
                {{"volume", volume_id}, {"alloc", alloc_id}, {"attempt", e.attempt}, {"error", e.error}});
    };
    auto told = co_await async::retry(
        [&](unsigned) -> asio::awaitable<async::Attempt> {
          auto s = co_await notify_(volume_id, alloc_id);
          co_return s ? async::Attempt::ok() : async::Attempt::again(s.error());
        },
        notify_options);
    if (!told.ok()) co_return;
  }
  if (auto s = co_await ops_.forget(alloc_id, volume_id); !s) {
    // The node side is clean and the control plane told; only the record stays (resume()
    // retries it after a restart, and telling the control plane again is harmless).
    kLog.error("release finished but its record was kept",
               {{"volume", volume_id}, {"alloc", alloc_id}, {"error", s.error()}});
    co_return;
  }
  kLog.info("volume released", {{"volume", volume_id}, {"alloc", alloc_id}});
  if (options_.released) options_.released->notify();
}

std::vector<RestoredVolume> VolumeManager::restore(const std::string& alloc_id) const {
  std::vector<RestoredVolume> out;
  for (const auto& record : store_.for_alloc(alloc_id)) {
    if (!in_use(record)) continue;
    RestoredVolume v{.volume_id = record.volume_id, .path = record.target_path};
    if (record.phase != MountPhase::mounted || record.published != StepState::done) {
      v.reason = "the mount was interrupted (" + std::string(to_string(record.phase)) + ")";
    } else if (!ops_.mounts().is_mounted(record.target_path)) {
      v.reason = "recorded as mounted but " + record.target_path + " is not a mount point any more";
    } else {
      // The staging path is not looked at: NodeStageVolume MAY leave nothing mounted there (the
      // upstream host-path driver stages nothing), so what the plugin said it staged stays
      // staged. Only the target the task uses must still be there.
      v.mounted = true;
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::string> VolumeManager::mounted_allocations() const {
  std::set<std::string> allocs;
  for (const auto& record : store_.all()) {
    if (in_use(record)) allocs.insert(record.alloc_id);
  }
  return {allocs.begin(), allocs.end()};
}

asio::awaitable<DetachResult> VolumeManager::detach(std::string volume_id, std::string alloc_id) {
  if (auto s = domain::validate_volume_key(volume_id); !s) co_return DetachResult{s.error()};
  if (!alloc_id.empty()) {
    if (auto s = domain::validate_allocation_id(alloc_id); !s) co_return DetachResult{s.error()};
  }
  std::vector<std::string> allocs;
  if (!alloc_id.empty()) {
    allocs.push_back(alloc_id);
  } else {
    for (const auto& record : store_.for_volume(volume_id)) allocs.push_back(record.alloc_id);
  }
  std::string errors;
  for (const auto& alloc : allocs) {
    auto r = co_await ops_.unmount(alloc, volume_id);
    if (!r.ok()) errors += (errors.empty() ? "" : "; ") + r.error;
  }
  co_return DetachResult{errors};
}

asio::awaitable<ExpandResult> VolumeManager::expand(std::string volume_id, std::string alloc_id,
                                                    std::string external_id, ::csi::v1::CapacityRange range,
                                                    std::map<std::string, std::string> secrets) {
  if (auto s = domain::validate_volume_key(volume_id); !s)
    co_return ExpandResult{.code = grpc::StatusCode::INVALID_ARGUMENT, .error = s.error()};
  if (!alloc_id.empty()) {
    if (auto s = domain::validate_allocation_id(alloc_id); !s)
      co_return ExpandResult{.code = grpc::StatusCode::INVALID_ARGUMENT, .error = s.error()};
  }
  ExpandResult last;
  std::function<asio::awaitable<async::Attempt>(unsigned)> attempt = [&](unsigned) -> asio::awaitable<async::Attempt> {
    last = co_await ops_.expand(volume_id, alloc_id, external_id, range, secrets);
    if (last.ok()) co_return async::Attempt::ok();
    co_return last.retryable ? async::Attempt::again(last.error) : async::Attempt::final_error(last.error);
  };
  async::RetryOptions options{.backoff = {.initial = std::chrono::milliseconds(200),
                                          .max = std::chrono::seconds(1),
                                          .max_elapsed = std::chrono::seconds(2)}};
  (void)co_await async::retry(std::move(attempt), std::move(options));
  co_return last;
}

asio::awaitable<std::vector<domain::VolumeStatsReport>> VolumeManager::collect_stats() {
  std::set<std::string> volume_ids;
  for (const auto& record : store_.all())
    if (in_use(record)) volume_ids.insert(record.volume_id);
  fresh_.clear();  // this pass covers them
  std::vector<domain::VolumeStatsReport> out;
  for (const auto& volume_id : volume_ids) {
    auto reports = co_await ops_.stats(volume_id);
    out.insert(out.end(), std::make_move_iterator(reports.begin()), std::make_move_iterator(reports.end()));
  }
  co_return out;
}

asio::awaitable<std::vector<domain::VolumeStatsReport>> VolumeManager::collect_fresh_stats() {
  std::set<std::string> volume_ids;
  volume_ids.swap(fresh_);
  std::vector<domain::VolumeStatsReport> out;
  for (const auto& volume_id : volume_ids) {
    // ops_.stats skips what is no longer published: a short-lived mount costs no call.
    auto reports = co_await ops_.stats(volume_id);
    out.insert(out.end(), std::make_move_iterator(reports.begin()), std::make_move_iterator(reports.end()));
  }
  co_return out;
}

asio::awaitable<std::vector<domain::VolumeStatsReport>> VolumeManager::stats_of(std::string volume_id) {
  if (!domain::validate_volume_key(volume_id)) co_return std::vector<domain::VolumeStatsReport>{};
  co_return co_await ops_.stats(std::move(volume_id));
}

asio::awaitable<bool> VolumeManager::shutdown(std::chrono::milliseconds grace) {
  tasks_.cancel();
  const bool stopped = co_await tasks_.join_for(grace);
  if (!stopped) kLog.warn("volume releases still stopping after shutdown grace", {{"running", tasks_.size()}});
  // The records' writes not awaited (Postrun never waits on a disk) land before the agent stops:
  // a release that unmounted but whose record still said unmounting would unmount again on resume.
  co_await store_.durable();
  co_return stopped;
}

std::map<std::string, std::size_t> VolumeManager::pending_unmounts() const {
  std::map<std::string, std::size_t> out;
  for (const auto& r : store_.all())
    if (r.phase == MountPhase::unmounting) ++out[r.plugin_id];
  return out;
}

}  // namespace mooring::nodeagent
