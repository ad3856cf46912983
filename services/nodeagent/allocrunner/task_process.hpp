// The allocation's task as a process that can outlive the agent. A task is not re-launched just
// because the agent restarted (that would break its work and its volumes' users), so:
//  - it runs in its own session (setsid): an agent killed with its process group does not take
//    the task along, and stop() signals the task's whole group;
//  - its stdout/stderr go to files in the allocation's directory, never to pipes into the agent
//    (a pipe would SIGPIPE the task once the agent is gone);
//  - the agent records pid + start time (/proc/<pid>/stat field 22) and, after a restart,
//    re-adopts the task with pidfd_open when that pid still runs with that start time (a pid
//    reused by another process is never adopted).
// A re-adopted task is not our child, so its exit code cannot be read: wait() then answers
// nullopt ("exit status unknown") and the runner reports that.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "services/nodeagent/process/cgroup.hpp"
#include "services/nodeagent/process/child_process.hpp"
#include "services/nodeagent/process/keeper_page.hpp"
#include "services/nodeagent/process/spawn.hpp"
#include "services/nodeagent/process/walls.hpp"
#include "shared/domain/result.hpp"

namespace mooring::nodeagent {

struct TaskHandle {
  pid_t pid = 0;
  std::uint64_t start_ticks = 0;  // /proc/<pid>/stat starttime: identifies this process, not the pid
  bool operator==(const TaskHandle&) const = default;
};

struct TaskSpec {
  std::string command;
  std::vector<std::string> args;
  // The task's whole environment besides kTaskPath/kTaskHome (which it may override): the
  // agent's own environment never reaches a task.
  std::map<std::string, std::string> env;
  std::filesystem::path stdout_path;
  std::filesystem::path stderr_path;
  std::filesystem::path working_dir;  // empty: the agent's
  // Set: the task starts behind these walls (its user, namespaces, root; process/walls.hpp)
  // under its init. Unset: a plain spawn as the agent's user (CSI plugin tasks, which mount for
  // the node), no init.
  std::optional<Walls> walls;
  // Set (with walls): the task's cgroup, named after its allocation, and its limits.
  std::string cgroup;
  CgroupLimits limits;
  // Set (with walls): the deadline the task's init keeps from its start on, until keep_until()
  // moves it (issue 43). Unset: none until then.
  std::optional<KeeperDeadline> keep_until;
};

// What a task gets when its spec does not set PATH or HOME.
inline constexpr const char* kTaskPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
inline constexpr const char* kTaskHome = "/";

// The environment variable that names a task's launch (the runner's intent record holds the
// same id): how a restarted agent finds a task whose pid it did not get to write down.
inline constexpr const char* kLaunchIdEnv = "MOORING_LAUNCH_ID";

// The processes of one launch, found by kLaunchIdEnv in /proc/<pid>/environ (readable by the
// agent: it runs as root or as the tasks' user).
struct LaunchProcesses {
  std::optional<TaskHandle> leader;  // the task itself: its own session leader (setsid)
  std::vector<pid_t> others;         // what it started, in its session or not
};
LaunchProcesses find_launch(const std::string& launch_id);

class TaskProcess {
 public:
  // Starts the task. A command that cannot be started (not found, not executable) is an error value.
  // May run on any thread (the agent starts tasks on its writer thread); the object is then used
  // on `ex` only.
  static domain::Expected<std::unique_ptr<TaskProcess>> start(boost::asio::any_io_executor ex, const TaskSpec& spec);
  // Re-attaches to a task started by an earlier agent; nullptr when it no longer runs.
  // `cgroup`: the name its start gave its cgroup ("" for none).
  static std::unique_ptr<TaskProcess> adopt(boost::asio::any_io_executor ex, TaskHandle handle,
                                            const std::string& cgroup = "");
  // Kills whatever is left in the cgroup `name` and removes it: what a task that ended while the
  // agent was down left behind. No-op for "" or a cgroup that is gone.
  static void clean_cgroup(const std::string& name);

  // Never kills the task: it outlives the runner on agent shutdown by design.
  ~TaskProcess();
  TaskProcess(const TaskProcess&) = delete;
  TaskProcess& operator=(const TaskProcess&) = delete;

  const TaskHandle& handle() const { return handle_; }
  bool adopted() const { return !child_; }

  // Completes when the task exited: its status, or nullopt when it cannot be known (adopted).
  // One waiter at a time; cancellable.
  boost::asio::awaitable<std::optional<ExitStatus>> wait();
  // SIGTERM to the task's process group (once: a task that traps it is not told twice); the
  // grace before SIGKILL counts from here. No-op once it exited.
  void terminate();
  // terminate(), SIGKILL `grace` after the SIGTERM; then the exit as wait() reports it.
  boost::asio::awaitable<std::optional<ExitStatus>> stop(std::chrono::milliseconds grace);
  // Sends `sig` to the task's process group; false once it exited.
  bool signal(int sig);
  bool exited() const { return exited_; }
  // The kernel's OOM killer killed a process of the task (its cgroup's memory limit); known
  // once it exited.
  bool oom_killed() const { return oom_killed_; }
  // Started under a task init (walled or not: every task but a CSI plugin's), which stands for the task.
  bool has_init() const;
  // The deadline the task's init stops it at on its own, with or without this agent (issue 43);
  // false when the task has no init keeping one (a plugin task, or an init without a keeper page).
  bool keep_until(const KeeperDeadline& deadline);
  std::optional<KeeperDeadline> kept_until() const;
  // Its init signalled it for that deadline (known once it exited, to the agent that started it).
  bool stopped_by_keeper() const { return stopped_by_keeper_; }

 private:
  struct Impl;
  TaskProcess(TaskHandle handle, bool child, std::unique_ptr<Impl> impl);
  std::optional<ExitStatus> reap();
  void after_exit();  // OOM check, stragglers killed, the cgroup removed
  static boost::asio::awaitable<void> wait_discarding(TaskProcess& task);

  TaskHandle handle_;
  bool child_ = false;
  bool exited_ = false;
  bool oom_killed_ = false;
  bool stopped_by_keeper_ = false;
  std::optional<std::chrono::steady_clock::time_point> terminated_at_;  // when SIGTERM was sent
  std::optional<ExitStatus> status_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::nodeagent
