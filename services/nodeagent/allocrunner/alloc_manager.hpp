// The allocations of this node: the WatchAllocations long poll (with the last index; backoff
// while the control plane is away, running allocations keep running), one AllocRunner per
// allocation, restored from the data dir after a restart, and the client-side disconnect rule
// (seed 004): when the control plane has not heard this node for longer than an allocation's
// StopAfterClientDisconnect, the allocation is stopped here and its volumes released by the
// normal Postrun path; the final status is delivered once the control plane is back. The same
// deadline (disconnect_deadline.hpp) is pushed to each walled task's init at every answered
// heartbeat, which stops the task on its own when this agent is dead (issue 43).
//
// A watch answer sends in full only what this agent does not hold as it is now
// (watched_allocations.hpp); an allocation named unchanged is reconciled from the body held, and
// its runner is not updated. A restarted agent holds nothing, so its first answer is in full (a
// restored allocation waiting for its SecretEnv gets it); one waiting for it is never named as held.
//
// Reconciliation with a watch answer:
//  - a new allocation for this node with desired=run and a non-terminal status: a runner starts;
//  - desired=stop: its runner stops (a stop for an allocation never seen here is reported
//    complete at once, so the control plane can release its claims);
//  - a finished runner whose allocation the control plane lists as terminal, or no longer lists
//    at all: destroyed (state removed);
//  - a running allocation the control plane no longer lists: stopped.
//
// Not thread-safe: use from the agent's executor.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "services/nodeagent/allocrunner/alloc_runner.hpp"
#include "services/nodeagent/allocrunner/csi_hook.hpp"
#include "services/nodeagent/allocrunner/disconnect_deadline.hpp"
#include "services/nodeagent/allocrunner/plugin_task_supervision.hpp"
#include "services/nodeagent/allocrunner/watched_allocations.hpp"
#include "shared/async/backoff.hpp"
#include "shared/async/task_group.hpp"

namespace mooring::async {
class WakeSignal;
}
namespace mooring::v1 {
class WatchAllocationsRequest;
class WatchAllocationsResponse;
}  // namespace mooring::v1

namespace mooring::nodeagent {

class ControlPlaneCalls;
class VolumeMounter;

struct AllocManagerOptions {
  std::string node_id;
  std::filesystem::path state_dir;  // {data_dir}/allocs
  AllocRunnerOptions runner;
  CsiHookOptions csi;  // node_id is filled from node_id
  std::chrono::milliseconds watch_wait{std::chrono::seconds(30)};
  async::Backoff watch_backoff{std::chrono::milliseconds(500), std::chrono::seconds(30), 2.0, 0.2};
  // Notified when the control plane answers again after failures (the agent's registration link
  // finds a new leader within about a second): a failed watch is retried then, not when its
  // backoff, grown during the outage, ends. Not owned; may be null.
  async::WakeSignal* controlplane_back = nullptr;
  std::chrono::milliseconds disconnect_check_interval{std::chrono::seconds(1)};
  // Supervision of plugin tasks (Task.CSIPlugin); null: their tasks run unsupervised (tests).
  PluginTaskSupervision* plugin_supervision = nullptr;
  // Short directory for plugin sockets whose path under state_dir would be too long.
  std::filesystem::path plugin_socket_root;
};

class AllocManager {
 public:
  // How long the control plane has not been reached (0 while connected).
  using DisconnectedFor = std::function<std::chrono::steady_clock::duration()>;

  AllocManager(boost::asio::any_io_executor ex, ControlPlaneCalls& controlplane, VolumeMounter& mounter,
               AllocStatusSink& status, AllocManagerOptions options);
  ~AllocManager();
  AllocManager(const AllocManager&) = delete;
  AllocManager& operator=(const AllocManager&) = delete;

  // Re-creates a runner for every allocation state left by a previous run and starts it.
  void restore();

  // Applies the full set of allocations for this node, as an answer that sends all in full
  // (tests; the watch goes through the two below).
  void apply(const std::vector<domain::Allocation>& allocs);
  // The next watch request: the last answer's index and incarnation, and the bodies held.
  void fill_watch_request(::mooring::v1::WatchAllocationsRequest& req) const;
  // Applies the answer to `req`. False: it could not be completed from what was held (see
  // WatchedAllocations::take); nothing changed and the next request is a first look.
  bool apply(const ::mooring::v1::WatchAllocationsRequest& req, const ::mooring::v1::WatchAllocationsResponse& resp);

  // The long poll; runs until cancelled.
  boost::asio::awaitable<void> watch();
  // The control plane answered a heartbeat or registration sent at `heard.sent`: every
  // allocation's deadline moves on (the keeper pages of their walled tasks too).
  void heard(const Heard& heard);
  // The client-side disconnect rule; runs until cancelled.
  boost::asio::awaitable<void> watch_disconnect(DisconnectedFor disconnected_for);
  // One check of the rule at `now` (for tests): past its deadline since the last heard(); before
  // any since this agent started, `disconnected_for` (the silence since then) past its limit.
  void check_disconnect(std::chrono::steady_clock::time_point now,
                        std::chrono::steady_clock::duration disconnected_for);

  // Drain mode: stops every allocation (their Postrun releases the volumes) and starts no new
  // one from then on. Idempotent.
  void stop_all(const std::string& reason);
  // Every runner has finished (its Postrun has returned).
  bool all_finished() const;

  // Cancels every runner (tasks keep running, see alloc_runner.hpp) and waits for them; hooks
  // get Shutdown. Never waits on a plugin.
  boost::asio::awaitable<void> shutdown();

  // Completes once every allocation state queued so far is on disk (see AllocStateStore).
  boost::asio::awaitable<void> states_durable() { return store_.durable(); }
  // Another durable write on the states' writer thread, covered by states_durable().
  void write_behind(const std::string& key, std::function<void()> write) { store_.submit_write(key, std::move(write)); }

  AllocRunner* runner(const std::string& alloc_id);
  std::vector<std::string> alloc_ids() const;
  std::uint64_t last_index() const { return watched_.index(); }

 private:
  AllocRunner& start_runner(AllocState state);
  // `unchanged`: listed by id only; their runners already hold them.
  void apply_listed(const std::map<std::string, const domain::Allocation*>& listed,
                    const std::set<std::string>& unchanged);
  void collect_finished(const std::map<std::string, const domain::Allocation*>& listed);

  boost::asio::any_io_executor ex_;
  ControlPlaneCalls& controlplane_;
  VolumeMounter& mounter_;
  AllocStatusSink& status_;
  AllocManagerOptions options_;
  AllocStateStore store_;
  std::map<std::string, std::unique_ptr<AllocRunner>> runners_;
  WatchedAllocations watched_;
  std::optional<Heard> heard_;
  bool shut_down_ = false;
  bool draining_ = false;
  async::TaskGroup runs_;  // last: destroyed (and cancelled) first
};

}  // namespace mooring::nodeagent
