// GC room: the volume watcher. One coroutine per volume with past claims, started by the change
// that made a claim past (allocation terminal, agent unpublish, operator detach, node loss) and
// ended when the volume has none left. Each worker drives its claims through node-detached ->
// controller-detached -> freed with the release rules, persisting every step before the next
// RPC; a failed step is recorded on the claim (LastError, NextAttempt), logged as an event and
// retried with a capped backoff. Nothing is dropped: a restart resumes every past claim from
// the state (one scan at start), and a slow sweep catches anything a change missed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "services/controlplane/state/change_feed.hpp"
#include "shared/async/backoff.hpp"
#include "shared/async/task_group.hpp"
#include "shared/domain/modes.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"
#include "shared/metrics/registry.hpp"

namespace mooring::domain {
struct Claim;
struct Volume;
}  // namespace mooring::domain
namespace mooring::controlplane {
class StateStore;
}

namespace mooring::controlplane::gc {

struct GcOptions {
  // Per claim: 500 ms, 1 s, 2 s, ... capped at 30 s (a stuck release is retried at least twice a
  // minute; Kubernetes' attacher caps at 5 min, which users find far too slow).
  async::Backoff backoff{.initial = std::chrono::milliseconds(500),
                         .max = std::chrono::seconds(30),
                         .multiplier = 2.0,
                         .jitter = 0.2,
                         .max_elapsed = std::chrono::milliseconds(0)};
  // Safety net: every period, any volume with past claims and no worker gets one.
  std::chrono::milliseconds sweep_period{std::chrono::minutes(5)};
  // A claim waiting for a down node is re-checked at least this often (node changes wake it sooner).
  std::chrono::milliseconds node_wait_recheck{std::chrono::minutes(1)};
};

class ReleaseCalls;

class ClaimGc {
 public:
  // `feed` must be the backend decorator the store writes through; `agents` (gc/release_calls.hpp)
  // sends the release's calls: the agent router, or a test's fake.
  ClaimGc(boost::asio::any_io_executor executor, StateStore& store, ChangeFeed& feed, ReleaseCalls& agents,
          GcOptions options = {});
  ~ClaimGc();
  ClaimGc(const ClaimGc&) = delete;
  ClaimGc& operator=(const ClaimGc&) = delete;

  // Resumes every past claim in the state and starts following changes. Call once, on the
  // store's executor, after the store is loaded.
  void start();
  // Cancels every worker and loop and waits for them.
  boost::asio::awaitable<void> stop();

  // Starts (or wakes) the worker of a volume at once.
  void kick(const std::string& volume_id);
  // An operator asked (detach): forget the backoff of the volume's claims and look again now.
  void retry_now(const std::string& volume_id);

  std::size_t active_workers() const { return workers_.size(); }
  // Volumes looked at because they changed (the work per change; never a scan of all volumes).
  std::uint64_t volumes_examined() const { return examined_; }
  std::uint64_t sweeps() const { return sweeps_; }

 private:
  struct Worker;
  struct Waiters {
    std::uint64_t seen_index = 0;  // the object's modify index when the waiters registered
    std::set<std::string> volumes;
  };

  boost::asio::awaitable<void> volume_loop();
  boost::asio::awaitable<void> wake_loop(int table);  // nodes / plugins: wake registered waiters
  boost::asio::awaitable<void> sweep_loop();
  boost::asio::awaitable<void> drive(std::string volume_id);
  boost::asio::awaitable<void> release_step(const std::string& volume_id, const std::string& alloc_id, Worker& w);
  // The node and controller steps' calls: true when done (persist the step), false when the
  // failure is recorded and the step waits for its retry.
  boost::asio::awaitable<bool> detach_node(const std::string& volume_id, const domain::Volume& v,
                                           const domain::Claim& claim, Worker& w);
  boost::asio::awaitable<bool> unpublish_controller(const std::string& volume_id, const domain::Volume& v,
                                                    const domain::Claim& claim, const std::string& external_node_id,
                                                    Worker& w);
  void persist_step(const std::string& volume_id, const std::string& alloc_id, domain::ClaimState target,
                    const std::string& reason, domain::Time began, Worker& w);
  void wait_for_plugin(const std::string& plugin_id, const std::string& volume_id);
  void failure(const std::string& volume_id, const std::string& alloc_id, Worker& w, const std::string& error,
               std::chrono::milliseconds delay);
  std::chrono::milliseconds next_delay(Worker& w, const std::string& alloc_id);
  void wait_on(std::map<std::string, Waiters>& waiters, const std::string& key, std::uint64_t index,
               const std::string& volume_id);
  void sweep();
  // Whether the plugin still has the volume published to the CSI node, asked with
  // ControllerGetVolume or ListVolumes when a healthy controller advertises it (with
  // LIST_VOLUMES_PUBLISHED_NODES). `published` unset: the plugin cannot tell (send the unpublish);
  // `unreachable` set: no controller answered (retry the step; send nothing now).
  struct PublishedCheck {
    std::optional<bool> published;
    std::string unreachable;
  };
  boost::asio::awaitable<PublishedCheck> still_published(const domain::Volume& v, const std::string& csi_node_id);

  StateStore& store_;
  ReleaseCalls& agents_;
  GcOptions options_;
  log::Logger log_{"claim-gc"};
  std::shared_ptr<ChangeSet> volume_changes_;
  std::map<std::string, std::unique_ptr<Worker>> workers_;
  std::map<std::string, Waiters> node_waiters_;    // node id -> volumes waiting for it
  std::map<std::string, Waiters> plugin_waiters_;  // plugin id -> volumes waiting for a controller
  std::uint64_t examined_ = 0;
  std::uint64_t sweeps_ = 0;
  // The unpublish operation ids of claims found node-detached at start: a previous leader (or
  // this process before a restart) may have sent their ControllerUnpublish, and the agent that
  // ran it may have restarted since (its operation cache is empty then). The plugin is asked
  // first; the normal path never pays for it.
  std::set<std::string> resumed_unpublishes_;
  // mooring_claim_release_seconds and mooring_gc_retries_total{step} (null with metrics off).
  metrics::Histogram release_seconds_;
  metrics::Counter node_detach_retries_, controller_detach_retries_, free_retries_;
  bool started_ = false;
  bool stopping_ = false;
  async::TaskGroup tasks_;  // last: destroyed (and cancelled) first
};

}  // namespace mooring::controlplane::gc
