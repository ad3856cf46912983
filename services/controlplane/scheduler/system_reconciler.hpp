// Scheduler room: the system reconciler. Keeps every running system allocation (a group) at one live
// copy per eligible node (system_placement.hpp): a node that joins, becomes ready or
// starts matching gets its copy; a copy that ended (failed, complete or lost) while the group
// runs is replaced on its node after a backoff (1 s doubling to 60 s per node, back to 1 s once
// a copy ran 5 minutes), kept in the group's record (SystemNodeState) so a restart resumes it; a
// copy stopped on purpose stays stopped while the group runs. It also drives rolling updates of
// plugin allocations (Rollout: one node at a time, new copy beside the old, the old stopped only
// once the node's fingerprint shows the new copy's plugin instance healthy).
// Woken by the change feed (allocations that changed name their group) and by node and plugin
// changes; timers only for deadlines it set itself (a backoff, a health timeout). Every step is
// one state commit per group, so a crash between steps resumes from the state.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "services/controlplane/state/change_feed.hpp"
#include "shared/async/task_group.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/domain/allocation.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane {
class StateStore;
class Batch;
}  // namespace mooring::controlplane

namespace mooring::controlplane::scheduler {

struct SystemOptions {
  domain::Duration restart_initial{std::chrono::seconds(1)};
  domain::Duration restart_max{std::chrono::seconds(60)};
  domain::Duration reset_after{std::chrono::minutes(5)};        // a copy that ran this long resets the backoff
  domain::Duration health_grace{std::chrono::seconds(10)};      // added to the plugin's HealthTimeout
  std::chrono::milliseconds max_wait{std::chrono::minutes(1)};  // safety recheck
};

class SystemReconciler {
 public:
  // `feed` must be the backend decorator the store writes through.
  SystemReconciler(boost::asio::any_io_executor executor, StateStore& store, ChangeFeed& feed,
                   SystemOptions options = {});
  ~SystemReconciler();
  SystemReconciler(const SystemReconciler&) = delete;
  SystemReconciler& operator=(const SystemReconciler&) = delete;

  // Scans the state once for groups and rolling updates, then follows changes.
  void start();
  boost::asio::awaitable<void> stop();

  // One pass at `now` over the groups and rolling updates it follows (tests call it directly).
  // Returns the earliest deadline it waits for (unset: none).
  domain::Time reconcile(domain::Time now);
  // Follow this allocation from now on (start() and the change feed call it).
  void follow(const std::string& alloc_id);
  std::size_t followed() const { return followed_.size(); }

 private:
  boost::asio::awaitable<void> loop();
  boost::asio::awaitable<void> allocation_watch();
  boost::asio::awaitable<void> table_watch(int table_number);
  // Returns false when the allocation needs no more following.
  bool reconcile_one(const std::string& id, domain::Time now, domain::Time& next);

  StateStore& store_;
  SystemOptions options_;
  std::shared_ptr<ChangeSet> changes_;
  std::set<std::string> followed_;  // groups and allocations under a rolling update
  log::Logger log_{"system"};
  bool stopping_ = false;
  async::WakeSignal wake_;
  async::TaskGroup tasks_;  // last
};

// ---- the decisions, one group at a time (pure over the state; tests call them too) ----

// What one reconcile step writes for the group `group` (a copy, changed in place): copies placed,
// backoffs scheduled, the rollout advanced. Adds to `batch`; lowers `next` to a deadline it waits
// for. Returns true when it wrote something.
bool reconcile_group(const StateStore& store, domain::Allocation& group, domain::Time now, const SystemOptions& options,
                     Batch& batch, domain::Time& next);

// One step of the rolling update recorded on `holder` (a group, or a single allocation being
// replaced). Returns true when it wrote something.
bool step_rollout(const StateStore& store, domain::Allocation& holder, domain::Time now, const SystemOptions& options,
                  Batch& batch, domain::Time& next);

// Adds the stop of `alloc` (desired stop, a task event and a cluster event giving `reason`) to `batch`.
void stop_in_batch(Batch& batch, const domain::Allocation& alloc, const std::string& reason, domain::Time now);

// How long a loop that waits for deadlines sleeps: until just past `next` (at least 5 ms), at
// most `max_wait` (also when `next` is unset).
std::chrono::milliseconds until_deadline(domain::Time next, domain::Time now, std::chrono::milliseconds max_wait);

// Does the node's fingerprint show the plugin instance of `alloc_id` healthy?
bool plugin_instance_healthy(const StateStore& store, const std::string& plugin_id, const std::string& node_id,
                             const std::string& alloc_id);

}  // namespace mooring::controlplane::scheduler
