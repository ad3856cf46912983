// One allocation on this node, from "received" to terminal: Prerun hooks (the CSI hook claims
// and mounts), the task as a process (or, without a task, just holding the volumes until
// stopped), then Postrun hooks, which return at once. Every step is queued for disk in order
// (alloc_state.hpp); a claim and the task's start wait until it is written, and the status
// reporter waits for it before it sends. Every status change and task event goes to the status sink.
//
// Client status: pending -> running -> complete (task exited 0, or stopped) | failed (Prerun
// failed, task could not start or exited non-zero). Stop (desired=stop, or the client-side
// disconnect rule) interrupts whatever runs: Prerun is cancelled, the task gets SIGTERM and
// SIGKILL after its kill timeout. Agent shutdown cancels run() and leaves the task running; the
// restarted agent builds a runner from the state and run() continues: a task still running is
// re-adopted, one that ended meanwhile is reported with an unknown exit status, mounts are
// restored (or claimed and mounted again).
//
// Not thread-safe: use from the agent's executor.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/nodeagent/allocrunner/alloc_hook.hpp"
#include "services/nodeagent/allocrunner/alloc_state.hpp"
#include "services/nodeagent/allocrunner/status_sink.hpp"
#include "services/nodeagent/allocrunner/task_walls.hpp"
#include "services/nodeagent/process/keeper_page.hpp"

namespace mooring::async {
class WakeSignal;
}

namespace mooring::nodeagent {

class TaskProcess;

struct AllocRunnerOptions {
  std::chrono::milliseconds default_kill_timeout{std::chrono::seconds(5)};
  // This node, as tasks see it: MOORING_NODE_ID / MOORING_NODE_NAME and ${node.id} / ${node.name}.
  std::string node_id;
  std::string node_name;
  // Set (the agent always sets it): tasks start behind walls as the node's rules say
  // (task_walls.hpp). Unset: a plain spawn as the agent's user.
  std::optional<TaskWallsOptions> walls;
};

// Nomad-style interpolation in a task's Args and Env values, so one system allocation gives each
// copy its node's identity: ${node.id}, ${node.name}, ${alloc.id}, ${alloc.name}, ${alloc.index}.
// Anything else in ${...} is left as written.
std::string interpolate(std::string_view text, const std::map<std::string, std::string>& vars);

class AllocRunner {
 public:
  AllocRunner(boost::asio::any_io_executor ex, AllocState state, AllocStateStore& store, AllocStatusSink& status,
              AllocRunnerOptions options = {});
  ~AllocRunner();
  AllocRunner(const AllocRunner&) = delete;
  AllocRunner& operator=(const AllocRunner&) = delete;

  // Hooks run in the order added (Postrun too). Add them before run().
  void add_hook(std::unique_ptr<AllocHook> hook);

  // The whole lifecycle; completes when the allocation is terminal. Spawn it in a task group.
  boost::asio::awaitable<void> run();

  // A newer version from the control plane; desired=stop stops the allocation.
  void update(const domain::Allocation& alloc);
  // Stops the allocation (idempotent); `reason` goes into the task events. `grace`: at most this
  // long between SIGTERM and SIGKILL, when the kill timeout is longer (the disconnect rule).
  void stop(std::string reason, std::optional<std::chrono::milliseconds> grace = {});
  // The deadline the task's init stops it at on its own (walled tasks; issue 43): its task gets
  // it now, a task started or re-adopted later at its start.
  void keep(const KeeperDeadline& deadline);
  std::chrono::milliseconds kill_timeout() const;

  // Records a task event (and reports it with the current status).
  void emit(std::string type, std::string message);
  // Persists a volume id the CSI hook is about to claim; completes once it is on disk.
  boost::asio::awaitable<void> note_claim(std::string volume_id);

  // The agent is shutting down: tell the hooks (run() is cancelled by the task group).
  void shutdown();
  // The allocation is gone for good: hooks' Destroy, and the state directory's removal queued
  // after its writes. Only once run() has finished.
  void destroy();

  const std::string& id() const { return state_.alloc.id; }
  const AllocState& state() const { return state_; }
  domain::ClientStatus client_status() const { return state_.client_status; }
  bool finished() const { return finished_; }
  bool stop_requested() const { return !state_.stop_reason.empty(); }

 private:
  // The task's life: started (or re-adopted), its Poststart hooks, its exit or stop.
  boost::asio::awaitable<void> run_task(const std::map<std::string, std::string>& env);
  boost::asio::awaitable<void> hold_volumes();
  boost::asio::awaitable<bool> secrets_arrived();
  TaskSpec task_spec(const std::map<std::string, std::string>& volume_env) const;
  boost::asio::awaitable<bool> start_task(const std::map<std::string, std::string>& volume_env);
  boost::asio::awaitable<bool> race_poststart(std::optional<std::optional<ExitStatus>>& exit);
  void record_exit(const std::optional<ExitStatus>& exit);
  // After a restart: re-adopts the task an earlier agent started (found by pid, or by launch id
  // when the pid was not written yet) into task_, or records that it is gone.
  void reattach_task();
  // SIGTERM, SIGKILL after the kill timeout, and the result; complete when a stop was asked.
  // `why`: the reason in the task events when it is not the stop's (a failed Poststart).
  boost::asio::awaitable<void> kill_task(std::string why = {});
  // The SIGTERM half of kill_task, at once: stop() calls it so the task hears of the stop in the
  // same turn, not after the runner's coroutine has been resumed through the executor's queue.
  void begin_kill(const std::string& why);
  boost::asio::awaitable<domain::Status> run_prerun(std::map<std::string, std::string>& env);
  boost::asio::awaitable<domain::Status> run_poststart();
  boost::asio::awaitable<void> wait_for_stop();
  // Completes once the control plane's copy of the allocation (with its SecretEnv values) came in.
  boost::asio::awaitable<bool> wait_for_secret_env();
  template <class T>
  boost::asio::awaitable<std::optional<T>> until_stopped(boost::asio::awaitable<T> op);
  void set_status(domain::ClientStatus status);
  void run_postrun();
  void save();

  boost::asio::any_io_executor ex_;
  AllocState state_;
  AllocStateStore& store_;
  AllocStatusSink& status_;
  AllocRunnerOptions options_;
  std::vector<std::unique_ptr<AllocHook>> hooks_;
  std::unique_ptr<TaskProcess> task_;
  std::unique_ptr<async::WakeSignal> stop_signal_;
  std::unique_ptr<async::WakeSignal> update_signal_;  // update() took a new allocation
  bool finished_ = false;
  bool killing_ = false;                            // SIGTERM sent and "Killing" reported
  std::optional<std::chrono::milliseconds> grace_;  // stop()'s cap on the kill timeout
  std::optional<KeeperDeadline> keep_;
};

}  // namespace mooring::nodeagent
