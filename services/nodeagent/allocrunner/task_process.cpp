#include "services/nodeagent/allocrunner/task_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "services/nodeagent/process/proc_stat.hpp"
#include "services/nodeagent/process/spawn.hpp"
#include "shared/async/with_timeout.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;

const log::Logger kLog{"task"};

// The task's own stdout or stderr file (close-on-exec here: spawn_process hands the child its copy).
domain::Expected<int> open_output(const std::filesystem::path& path) {
  if (path.empty()) return -1;  // /dev/null
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return domain::error("cannot open " + path.string() + ": " + std::strerror(errno));
  return fd;
}

}  // namespace

// A plain function, not a lambda: the coroutine frame must not refer to a temporary closure.
asio::awaitable<void> TaskProcess::wait_discarding(TaskProcess& task) { (void)co_await task.wait(); }

LaunchProcesses find_launch(const std::string& launch_id) {
  LaunchProcesses out;
  if (launch_id.empty()) return out;
  const std::string entry = std::string(kLaunchIdEnv) + "=" + launch_id;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid() || !environ_has(pid, entry)) continue;
    const auto st = proc_stat(pid);
    if (!st || st->state == 'Z') continue;
    if (st->session == pid && !out.leader) {
      out.leader = TaskHandle{pid, st->start_ticks};
    } else if (!out.leader && st->session != pid && is_namespace_init(st->session)) {
      // A walled task: its session is the namespace's init, which stands for it.
      if (const auto ticks = process_start_ticks(st->session)) out.leader = TaskHandle{st->session, *ticks};
    } else {
      out.others.push_back(pid);
    }
  }
  return out;
}

struct TaskProcess::Impl {
  explicit Impl(asio::any_io_executor ex) : pidfd(ex) {}
  asio::posix::stream_descriptor pidfd;
  UniqueFd report;    // the init's report of the task's wait status
  bool init = false;  // started under a task init (walled or not), which stands for the task
  TaskCgroup cgroup;
  KeeperPage keeper;  // the init's deadline
};

bool TaskProcess::has_init() const { return impl_->init; }

bool TaskProcess::keep_until(const KeeperDeadline& deadline) {
  if (!impl_->keeper || exited_) return false;
  impl_->keeper.set(deadline);
  return true;
}

std::optional<KeeperDeadline> TaskProcess::kept_until() const { return impl_->keeper.get(); }

void TaskProcess::clean_cgroup(const std::string& name) {
  if (name.empty()) return;
  const auto cg = TaskCgroup::find(name);
  if (cg.empty()) return;
  cg.kill_all();
  cg.remove();
}

namespace {

// The walled start: the cgroup first (the child joins it before anything else), then the clone.
// With or without namespaces the task runs under its init, which keeps the keeper page.
domain::Expected<WalledChild> start_walled(const TaskSpec& spec, SpawnRequest& request, TaskCgroup& cgroup,
                                           KeeperPage& keeper) {
  Walls walls = *spec.walls;
  keeper = KeeperPage::create();
  if (!keeper) return domain::error(std::string("task keeper page: ") + std::strerror(errno));
  if (spec.keep_until) keeper.set(*spec.keep_until);
  walls.keeper_fd = keeper.fd();
  std::vector<UniqueFd> procs;
  UniqueFd dir;
  if (!spec.cgroup.empty()) {
    auto made = TaskCgroup::create(spec.cgroup, spec.limits);
    if (auto* err = std::get_if<std::string>(&made)) return domain::error("task cgroup: " + *err);
    cgroup = std::get<TaskCgroup>(std::move(made));
    for (const int fd : cgroup.open_procs()) {
      procs.emplace_back(fd);
      walls.cgroup_procs.push_back(fd);
    }
    // Without a PID namespace the init finds the task's processes in the cgroup.
    if (!walls.namespaces) {
      dir = UniqueFd{cgroup.open_dir()};
      if (dir.fd < 0) return domain::error("task cgroup: open " + spec.cgroup + ": " + std::strerror(errno));
      walls.cgroup_dir = dir.fd;
    }
  }
  auto spawned = spawn_walled(request, walls);
  if (auto* err = std::get_if<WallError>(&spawned)) {
    if (!cgroup.empty()) cgroup.remove();
    return domain::error(err->message());
  }
  return std::get<WalledChild>(spawned);
}

}  // namespace

TaskProcess::TaskProcess(TaskHandle handle, bool child, std::unique_ptr<Impl> impl)
    : handle_(handle), child_(child), impl_(std::move(impl)) {}

TaskProcess::~TaskProcess() = default;

domain::Expected<std::unique_ptr<TaskProcess>> TaskProcess::start(asio::any_io_executor ex, const TaskSpec& spec) {
  if (spec.command.empty()) return domain::error("task has no command");
  // A clean environment: nothing of the agent's own (plugin credentials, its tokens) reaches
  // the task; the spec (Task.Env, Task.SecretEnv, the MOORING_* variables) may override these.
  std::map<std::string, std::string> env{{"PATH", kTaskPath}, {"HOME", kTaskHome}};
  for (const auto& [k, v] : spec.env) env[k] = v;
  // A bare command name is looked up in the task's PATH, not the agent's.
  const auto program = resolve_command(spec.command, env["PATH"]);
  if (!program)
    return domain::error("cannot start task \"" + spec.command + "\": not found in the task's PATH (" + env["PATH"] +
                         ")");
  // Opened here rather than in the child, so a file that cannot be opened is named in the error.
  const auto out_fd = open_output(spec.stdout_path);
  if (!out_fd) return domain::error("cannot start task \"" + spec.command + "\": " + out_fd.error());
  UniqueFd out{*out_fd};
  const auto err_fd = open_output(spec.stderr_path);
  if (!err_fd) return domain::error("cannot start task \"" + spec.command + "\": " + err_fd.error());
  UniqueFd err{*err_fd};
  SpawnRequest request;
  request.program = *program;
  request.argv.push_back(spec.command);
  request.argv.insert(request.argv.end(), spec.args.begin(), spec.args.end());
  request.env = std::move(env);
  request.stdout_fd = out.fd;
  request.stderr_fd = err.fd;
  request.working_dir = spec.working_dir;
  request.isolation = SpawnRequest::Isolation::own_session;
  auto impl = std::make_unique<Impl>(ex);
  pid_t pid = -1;
  if (spec.walls) {
    const auto walled = start_walled(spec, request, impl->cgroup, impl->keeper);
    if (!walled) return domain::error("cannot start task \"" + spec.command + "\": " + walled.error());
    pid = walled->pid;
    impl->report.fd = walled->report;
    impl->init = true;
  } else {
    const auto spawned = spawn_process(request);
    if (!spawned) return domain::error("cannot start task \"" + spec.command + "\": " + spawned.error().message());
    pid = *spawned;
  }

  const int fd = open_pidfd(pid);
  if (fd < 0) {
    const int e = errno;
    ::kill(-pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    if (!impl->cgroup.empty()) {  // an unwalled init's task is in a group of its own
      impl->cgroup.kill_all();
      impl->cgroup.remove();
    }
    return domain::error(std::string("pidfd_open failed for the task: ") + std::strerror(e));
  }
  impl->pidfd.assign(fd);
  TaskHandle handle{pid, process_start_ticks(pid).value_or(0)};
  kLog.info("task started", {{"pid", static_cast<int64_t>(pid)}, {"command", spec.command}});
  return std::unique_ptr<TaskProcess>(new TaskProcess(handle, true, std::move(impl)));
}

std::unique_ptr<TaskProcess> TaskProcess::adopt(asio::any_io_executor ex, TaskHandle handle,
                                                const std::string& cgroup) {
  if (handle.pid <= 0) return nullptr;
  const int fd = open_pidfd(handle.pid);
  if (fd < 0) return nullptr;
  // Checked after opening the pidfd: if the start time still matches now, the pidfd refers to
  // our task and not to a process that reused its pid.
  const auto ticks = process_start_ticks(handle.pid);
  if (!ticks || *ticks != handle.start_ticks) {
    ::close(fd);
    return nullptr;
  }
  auto impl = std::make_unique<Impl>(ex);
  impl->pidfd.assign(fd);
  impl->init = is_task_init(handle.pid);
  // The deadline goes on from where the earlier agent left it (issue 43).
  if (impl->init) impl->keeper = KeeperPage::of_init(handle.pid);
  if (!cgroup.empty()) impl->cgroup = TaskCgroup::find(cgroup);
  kLog.info("task re-adopted after an agent restart", {{"pid", static_cast<int64_t>(handle.pid)}});
  return std::unique_ptr<TaskProcess>(new TaskProcess(handle, false, std::move(impl)));
}

std::optional<ExitStatus> TaskProcess::reap() {
  if (!child_) return std::nullopt;
  int st = 0;
  const pid_t r = ::waitpid(handle_.pid, &st, 0);
  if (r != handle_.pid) return std::nullopt;
  // The init's own exit stands for the task's only when it could not report (SIGKILL).
  if (impl_->report.fd >= 0)
    if (const auto task_status = read_task_status(impl_->report.fd, &stopped_by_keeper_))
      return exit_status_from_wait(*task_status);
  return exit_status_from_wait(st);
}

void TaskProcess::after_exit() {
  impl_->report.close();
  if (impl_->cgroup.empty()) return;
  oom_killed_ = impl_->cgroup.oom_kills() > 0;
  // A task that double-forked out of its group or session is still in its cgroup.
  if (!impl_->cgroup.kill_all())
    kLog.warn("processes of the task survive in its cgroup", {{"pid", static_cast<int64_t>(handle_.pid)}});
  impl_->cgroup.remove();
}

asio::awaitable<std::optional<ExitStatus>> TaskProcess::wait() {
  if (!exited_) {
    co_await impl_->pidfd.async_wait(asio::posix::stream_descriptor::wait_read, asio::use_awaitable);
    exited_ = true;
    status_ = reap();
    impl_->pidfd.close();
    after_exit();
  }
  co_return status_;
}

bool TaskProcess::signal(int sig) {
  if (exited_) return false;
  // Own session: the process group id is the task's pid. Also signal the leader through the
  // pidfd, which cannot hit a reused pid.
  ::syscall(SYS_pidfd_send_signal, impl_->pidfd.native_handle(), sig, nullptr, 0);
  // Under an init: it passes it on to every process of the task, once (the task is in a process
  // group of its own, so the init's group is the init alone).
  if (!impl_->init) ::kill(-handle_.pid, sig);
  return true;
}

void TaskProcess::terminate() {
  if (exited_ || terminated_at_) return;
  terminated_at_ = std::chrono::steady_clock::now();
  signal(SIGTERM);
}

asio::awaitable<std::optional<ExitStatus>> TaskProcess::stop(std::chrono::milliseconds grace) {
  if (exited_) co_return status_;
  terminate();
  const auto left =
      std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 *terminated_at_ + grace - std::chrono::steady_clock::now()));
  // Not inside the if-condition: GCC 12 mishandles a coroutine temporary there.
  auto waiting = wait_discarding(*this);
  const bool exited_in_time = co_await async::with_timeout(std::move(waiting), left);
  if (!exited_in_time) {
    kLog.warn("task did not stop after SIGTERM; sending SIGKILL",
              {{"pid", static_cast<int64_t>(handle_.pid)}, {"grace", grace}});
    signal(SIGKILL);
  }
  co_return co_await wait();
}

}  // namespace mooring::nodeagent
