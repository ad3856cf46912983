#include "services/nodeagent/allocrunner/alloc_runner.hpp"

#include <signal.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/nodeagent/allocrunner/task_process.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/async/with_timeout.hpp"
#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using domain::ClientStatus;

const log::Logger kLog{"alloc-runner"};

}  // namespace

std::string interpolate(std::string_view text, const std::map<std::string, std::string>& vars) {
  std::string out;
  while (!text.empty()) {
    const auto open = text.find("${");
    if (open == std::string_view::npos) break;
    const auto close = text.find('}', open + 2);
    if (close == std::string_view::npos) break;
    out.append(text.substr(0, open));
    const auto it = vars.find(std::string(text.substr(open + 2, close - open - 2)));
    if (it != vars.end())
      out += it->second;
    else
      out.append(text.substr(open, close - open + 1));
    text.remove_prefix(close + 1);
  }
  out.append(text);
  return out;
}

AllocRunner::AllocRunner(asio::any_io_executor ex, AllocState state, AllocStateStore& store, AllocStatusSink& status,
                         AllocRunnerOptions options)
    : ex_(ex),
      state_(std::move(state)),
      store_(store),
      status_(status),
      options_(options),
      stop_signal_(std::make_unique<async::WakeSignal>(ex)),
      update_signal_(std::make_unique<async::WakeSignal>(ex)) {}

AllocRunner::~AllocRunner() = default;

void AllocRunner::add_hook(std::unique_ptr<AllocHook> hook) { hooks_.push_back(std::move(hook)); }

// Queued for the store's writer thread (see AllocStateStore); what must be on disk before
// something leaves the agent awaits store_.durable().
void AllocRunner::save() { store_.submit(state_); }

void AllocRunner::emit(std::string type, std::string message) {
  domain::TaskEvent e{domain::now(), std::move(type), std::move(message)};
  kLog.info("allocation event", {{"alloc", id()}, {"type", e.type}, {"message", e.message}});
  status_.report(id(), state_.client_status, {std::move(e)});
}

void AllocRunner::set_status(ClientStatus status) {
  if (state_.client_status == status) return;
  state_.client_status = status;
  save();
  status_.report(id(), status, {});
}

asio::awaitable<void> AllocRunner::note_claim(std::string volume_id) {
  for (const auto& v : state_.claimed_volumes)
    if (v == volume_id) co_return;
  state_.claimed_volumes.push_back(volume_id);
  save();
  co_await store_.durable();  // write-ahead: a restart must know to release this claim
}

namespace {

// What the agent acts on: the allocation without what only the control plane keeps (events,
// indexes, the client status the agent itself reported). Every report the agent sends comes
// back as a modified allocation; only a change here is worth a durable write.
bool same_spec(domain::Allocation a, domain::Allocation b) {
  for (auto* x : {&a, &b}) {
    x->client_status = domain::ClientStatus::pending;
    x->events.clear();
    x->create_index = x->modify_index = 0;
  }
  return a == b;
}

}  // namespace

void AllocRunner::update(const domain::Allocation& alloc) {
  if (alloc.id != id()) return;
  const bool changed = !same_spec(state_.alloc, alloc);
  // Keep the local view of the client status; take everything else from the control plane.
  auto client_status = state_.client_status;
  state_.alloc = alloc;
  state_.alloc.client_status = client_status;
  state_.secret_env_pending = false;  // the control plane's copy carries the values
  update_signal_->notify();
  if (alloc.desired_status == domain::DesiredStatus::stop) {
    stop("stopped by the control plane");
  } else if (changed) {
    save();
  }
}

void AllocRunner::stop(std::string reason, std::optional<std::chrono::milliseconds> grace) {
  if (!state_.stop_reason.empty() || finished_) return;
  state_.stop_reason = std::move(reason);
  grace_ = grace;
  save();
  emit("StopRequested", state_.stop_reason);
  if (task_ && !task_->exited()) begin_kill({});
  stop_signal_->notify();
}

asio::awaitable<bool> AllocRunner::wait_for_secret_env() {
  auto gen = update_signal_->generation();
  while (state_.secret_env_pending) gen = co_await update_signal_->wait(gen);
  co_return true;
}

asio::awaitable<void> AllocRunner::wait_for_stop() {
  auto gen = stop_signal_->generation();
  while (state_.stop_reason.empty()) gen = co_await stop_signal_->wait(gen);
}

// The op's value, or nullopt when a stop came first (the op was then cancelled and awaited).
template <class T>
asio::awaitable<std::optional<T>> AllocRunner::until_stopped(asio::awaitable<T> op) {
  if (stop_requested()) co_return std::nullopt;
  auto ex = co_await asio::this_coro::executor;
  std::optional<T> out;
  auto [order, op_error, stop_error] =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(ex, async::detail::store_result(std::move(op), out), asio::deferred),
          asio::co_spawn(ex, wait_for_stop(), asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  (void)stop_error;
  if (order[0] == 0) {
    if (op_error) std::rethrow_exception(op_error);
    co_return out;
  }
  co_return std::nullopt;
}

asio::awaitable<domain::Status> AllocRunner::run_prerun(std::map<std::string, std::string>& env) {
  for (auto& hook : hooks_) {
    auto st = co_await hook->prerun(env);
    if (!st) co_return domain::error(std::string(hook->name()) + " hook: " + st.error());
  }
  co_return domain::Status{};
}

asio::awaitable<domain::Status> AllocRunner::run_poststart() {
  for (auto& hook : hooks_) {
    auto st = co_await hook->poststart();
    if (!st) co_return domain::error(std::string(hook->name()) + " hook: " + st.error());
  }
  co_return domain::Status{};
}

void AllocRunner::run_postrun() {
  for (auto& hook : hooks_) hook->postrun();
  state_.postrun_done = true;
  state_.task.reset();
  save();
}

asio::awaitable<void> AllocRunner::run() {
  if (state_.postrun_done) {
    // Terminal before a restart: report again (harmless if the control plane already knows).
    status_.report(id(), state_.client_status, {});
    finished_ = true;
    co_return;
  }
  const bool resumed = state_.task_started || state_.client_status != ClientStatus::pending ||
                       !state_.claimed_volumes.empty() || !state_.launch_id.empty();
  save();
  emit(resumed ? "Resumed" : "Received",
       resumed ? "allocation resumed after an agent restart" : "allocation received by the node agent");
  if (state_.alloc.desired_status == domain::DesiredStatus::stop && state_.stop_reason.empty())
    stop("stopped by the control plane");

  // A task an earlier agent started is found before anything else runs, so that a stop in any
  // phase after the restart (the volume setup below can take seconds) reaches it.
  if (resumed) reattach_task();

  const bool task_ended_earlier = state_.task_started && !task_;
  if (task_ended_earlier) {
    // The task ended (or its start failed) before the restart: nothing to set up again.
    if (state_.client_status == ClientStatus::pending || state_.client_status == ClientStatus::running)
      set_status(stop_requested() ? ClientStatus::complete : ClientStatus::failed);
  } else if (stop_requested()) {
    if (task_) {
      co_await kill_task();
    } else {
      state_.task_result = "stopped before the task started";
      set_status(ClientStatus::complete);
    }
  } else {
    std::map<std::string, std::string> env;
    auto prerun = co_await until_stopped(run_prerun(env));
    if (!prerun) {
      if (task_) {
        co_await kill_task();
      } else {
        state_.task_result = "stopped before the task started";
        set_status(ClientStatus::complete);
      }
    } else if (!*prerun) {
      emit("SetupFailure", prerun->error());
      if (task_) {
        // A re-adopted task whose volumes could not be set up again: it must not run on while
        // Postrun releases them.
        co_await kill_task();
      }
      state_.task_result = prerun->error();
      // A stop that reached the control plane while the setup was in flight makes it refuse the
      // claim; the allocation was stopped, so it ends complete like any other stopped one.
      set_status(stop_requested() ? ClientStatus::complete : ClientStatus::failed);
    } else {
      co_await run_task(env);
    }
  }

  run_postrun();
  emit("Terminated",
       state_.task_result.empty() ? std::string(domain::to_string(state_.client_status)) : state_.task_result);
  finished_ = true;
}

void AllocRunner::reattach_task() {
  if (!state_.alloc.task) return;
  if (!state_.task && !state_.task_started && !state_.launch_id.empty()) {
    // The agent stopped between the start's intent and the pid's write: the task may run. Find
    // it by its launch id; never start a second copy.
    auto found = find_launch(state_.launch_id);
    state_.task_started = true;
    if (found.leader) {
      state_.task = found.leader;
      emit("Reattached", "task pid " + std::to_string(found.leader->pid) +
                             " found by its launch id after an agent restart (its pid was not recorded yet)");
    } else {
      // The task itself is gone; what it started must not run on with its volumes.
      for (const pid_t straggler : found.others) ::kill(straggler, SIGKILL);
      TaskProcess::clean_cgroup(id());
      state_.task_result =
          "the agent stopped while starting the task and found no process of it after the restart; "
          "it is not started a second time";
      emit("DriverFailure", state_.task_result);
    }
    save();
  }
  if (!state_.task) return;
  task_ = TaskProcess::adopt(ex_, *state_.task, id());
  if (!task_) {
    TaskProcess::clean_cgroup(id());  // what it double-forked must not outlive it
    state_.task.reset();
    state_.task_result = "the task ended while the agent was down; its exit status is unknown";
    save();
    return;
  }
  emit("Reattached", "task pid " + std::to_string(state_.task->pid) + " re-adopted after an agent restart");
  if (keep_) task_->keep_until(*keep_);  // else the earlier agent's deadline holds until heard
}

void AllocRunner::keep(const KeeperDeadline& deadline) {
  keep_ = deadline;
  if (task_) task_->keep_until(deadline);
}

std::chrono::milliseconds AllocRunner::kill_timeout() const {
  const auto& alloc = state_.alloc;
  auto timeout = alloc.task ? std::chrono::duration_cast<std::chrono::milliseconds>(alloc.task->kill_timeout)
                            : std::chrono::milliseconds(0);
  timeout = timeout.count() > 0 ? timeout : options_.default_kill_timeout;
  return grace_ ? std::min(timeout, *grace_) : timeout;
}

namespace {

std::string kill_reason(const std::string& why, const std::string& stop_reason) {
  if (!why.empty()) return why;
  return stop_reason.empty() ? std::string("its volumes could not be set up again") : stop_reason;
}

}  // namespace

void AllocRunner::begin_kill(const std::string& why) {
  if (killing_ || !task_) return;
  killing_ = true;
  emit("Killing", "sending SIGTERM (SIGKILL after " + std::to_string(kill_timeout().count()) +
                      " ms): " + kill_reason(why, state_.stop_reason));
  task_->terminate();
}

asio::awaitable<void> AllocRunner::kill_task(std::string why) {
  const std::string reason = kill_reason(why, state_.stop_reason);
  begin_kill(reason);
  auto status = co_await task_->stop(kill_timeout());
  state_.task_result =
      "stopped: " + reason + " (" + (status ? status->describe() : std::string("exit status unknown")) + ")";
  emit("Killed", state_.task_result);
  state_.task.reset();
  if (stop_requested()) set_status(ClientStatus::complete);
}

asio::awaitable<void> AllocRunner::run_task(const std::map<std::string, std::string>& volume_env) {
  if (!state_.alloc.task) {
    co_await hold_volumes();
    co_return;
  }
  if (!task_ && state_.secret_env_pending) {
    const bool arrived = co_await secrets_arrived();
    if (!arrived) co_return;
  }
  if (!task_) {
    const bool started = co_await start_task(volume_env);
    if (!started) co_return;
  }
  set_status(ClientStatus::running);  // a re-adopted task; nothing to do after a start
  std::optional<std::optional<ExitStatus>> exit;
  const bool going_on = co_await race_poststart(exit);
  if (!going_on) co_return;
  if (!exit) exit = co_await until_stopped(task_->wait());
  if (!exit) {
    co_await kill_task();
    co_return;
  }
  record_exit(*exit);
}

// No task: the allocation holds its volumes until it is stopped.
asio::awaitable<void> AllocRunner::hold_volumes() {
  set_status(ClientStatus::running);
  emit("Running", "no task: holding the volumes until the allocation is stopped");
  co_await wait_for_stop();
  state_.task_result = "stopped: " + state_.stop_reason;
  set_status(ClientStatus::complete);
}

// Restored from disk, where SecretEnv values are never written: the task starts once the watch
// has brought the control plane's copy. False when the allocation was stopped first.
asio::awaitable<bool> AllocRunner::secrets_arrived() {
  emit("WaitingForSecrets", "waiting for the control plane to send the task's SecretEnv");
  // A named local, not the co_await in the if: GCC 12 trapped (ud2) resuming that form here.
  const auto arrived = co_await until_stopped(wait_for_secret_env());
  if (arrived) co_return true;
  state_.task_result = "stopped before the task started";
  set_status(ClientStatus::complete);
  co_return false;
}

TaskSpec AllocRunner::task_spec(const std::map<std::string, std::string>& volume_env) const {
  const auto& alloc = state_.alloc;
  const std::map<std::string, std::string> vars{{"node.id", options_.node_id},
                                                {"node.name", options_.node_name},
                                                {"alloc.id", alloc.id},
                                                {"alloc.name", alloc.name},
                                                {"alloc.index", std::to_string(alloc.index)}};
  TaskSpec spec;
  spec.command = alloc.task->command;
  for (const auto& a : alloc.task->args) spec.args.push_back(interpolate(a, vars));
  for (const auto& [k, v] : alloc.task->env) spec.env[k] = interpolate(v, vars);
  for (const auto& [k, v] : alloc.task->secret_env) spec.env[k] = v;  // secrets as given
  for (const auto& [k, v] : volume_env) spec.env[k] = v;
  spec.env["MOORING_ALLOC_ID"] = alloc.id;
  spec.env["MOORING_ALLOC_NAME"] = alloc.name;
  if (!options_.node_id.empty()) spec.env["MOORING_NODE_ID"] = options_.node_id;
  if (!options_.node_name.empty()) spec.env["MOORING_NODE_NAME"] = options_.node_name;
  return spec;
}

// Starts the task into task_; false (the allocation failed, saying why) when it could not start.
asio::awaitable<bool> AllocRunner::start_task(const std::map<std::string, std::string>& volume_env) {
  const auto& alloc = state_.alloc;
  auto dir = store_.alloc_dir(id());
  TaskSpec spec = task_spec(volume_env);
  spec.keep_until = keep_;
  // The start's intent: written with the state below before the spawn, so a restart that
  // finds it without a pid looks for this launch rather than starting the task again.
  state_.launch_id = domain::new_id();
  spec.env[kLaunchIdEnv] = state_.launch_id;
  save();
  if (dir) {
    spec.stdout_path = *dir / "stdout.log";
    spec.stderr_path = *dir / "stderr.log";
  }
  // The state so far is on disk (and the directory the task's output goes to exists) before
  // the task starts. Started on the writer thread: posix_spawn blocks its caller until the
  // child has exec'd (~1 ms), which the executor's other allocations should not wait out.
  domain::Expected<std::unique_ptr<TaskProcess>> started = domain::error("task not started");
  co_await store_.after_durable([&] {
    // The user, the volumes' group and the walls are settled here, off the executor: a
    // volume's first group change walks its tree.
    if (options_.walls && dir)
      if (auto walled = wall_task(alloc, *dir, volume_env, *options_.walls, spec); !walled) {
        started = domain::error("cannot start task \"" + spec.command + "\": " + walled.error());
        return;
      }
    started = TaskProcess::start(ex_, spec);
  });
  state_.task_started = true;
  if (!started) {
    state_.task_result = started.error();
    emit("DriverFailure", started.error());
    set_status(ClientStatus::failed);
    co_return false;
  }
  task_ = std::move(*started);
  state_.task = task_->handle();
  state_.client_status = ClientStatus::running;  // one durable write for the pid and the status
  save();
  emit("Started", "task started with pid " + std::to_string(task_->handle().pid));  // reports running
  co_return true;
}

// Poststart hooks race the task and a stop: a plugin task that never becomes healthy fails the
// allocation (and is stopped); a task that ends first is just its exit (into `exit`). False when
// the race ended the allocation (a stop, or a failed hook).
asio::awaitable<bool> AllocRunner::race_poststart(std::optional<std::optional<ExitStatus>>& exit) {
  auto ex = co_await asio::this_coro::executor;
  std::optional<domain::Status> post;
  auto [order, post_error, exit_error, stop_error] =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(ex, async::detail::store_result(run_poststart(), post), asio::deferred),
          asio::co_spawn(ex, async::detail::store_result(task_->wait(), exit), asio::deferred),
          asio::co_spawn(ex, wait_for_stop(), asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  (void)stop_error;
  if (order[0] == 0 && post_error) std::rethrow_exception(post_error);
  if (order[0] == 1 && exit_error) std::rethrow_exception(exit_error);
  if (order[0] == 2) {
    co_await kill_task();
    co_return false;
  }
  if (order[0] == 0) {
    exit.reset();
    if (!*post) {
      emit("SetupFailure", post->error());
      co_await kill_task(post->error());
      state_.task_result = post->error();
      set_status(ClientStatus::failed);
      co_return false;
    }
  }
  co_return true;
}

void AllocRunner::record_exit(const std::optional<ExitStatus>& exit) {
  state_.task.reset();
  if (!stop_requested() &&
      (task_->stopped_by_keeper() || (keep_ && std::chrono::steady_clock::now() >= keep_->term_at))) {
    // Its init stopped it at the disconnect deadline (issue 43), ahead of this agent's own check.
    state_.stop_reason = "no contact with the control plane by the deadline of stop_after_client_disconnect";
    state_.task_result = "stopped by the task's init: " + state_.stop_reason + " (" +
                         (exit ? exit->describe() : std::string("exit status unknown")) + ")";
    emit("Killed", state_.task_result);
    set_status(ClientStatus::complete);
  } else if (task_->oom_killed()) {
    state_.task_result = "OOM killed: the task went over its memory limit of " +
                         std::to_string(state_.alloc.task->resources.memory_mb) + " MB";
    emit("OOM killed", state_.task_result);
    set_status(ClientStatus::failed);
  } else if (exit) {
    state_.task_result = "task " + exit->describe();
    set_status(exit->success() ? ClientStatus::complete : ClientStatus::failed);
  } else {
    // Re-adopted task: not our child, so its exit code is not ours to read.
    state_.task_result = "task exited; exit status unknown (re-adopted after an agent restart)";
    set_status(stop_requested() ? ClientStatus::complete : ClientStatus::failed);
  }
}

void AllocRunner::shutdown() {
  for (auto& hook : hooks_) hook->shutdown();
}

void AllocRunner::destroy() {
  for (auto& hook : hooks_) hook->destroy();
  store_.submit_remove(id());
}

}  // namespace mooring::nodeagent
