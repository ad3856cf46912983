// A task's start behind its own walls (issue 41). The child is made with clone(2), not
// posix_spawn, because namespaces, a new root and a user switch have to happen between the clone
// and the exec. Like posix_spawn, the child shares the agent's memory until its exec (CLONE_VM |
// CLONE_VFORK), so it runs only system calls on data prepared before the clone (it allocates
// nothing). With namespaces the child is PID 1 of a new PID namespace: it enters a copy of the
// walls' template (walls_template.hpp: the part of the root every task shares, made once per
// agent), mounts the task's own part, switches user, and execs the task's init (task_init.cpp, embedded in the agent), which starts
// the task, forwards signals to every process of the namespace, reaps orphans and reports the
// task's wait status; when it dies the kernel kills whatever the task left behind. Without
// namespaces the child joins the cgroup, switches user and execs the same init, which keeps the
// task's cgroup instead of a namespace (issue 43: a dead agent's unwalled task is stopped too).
//
// A failed step is reported back through a close-on-exec pipe and named ("bind /srv/v1: No such
// file or directory"); nothing is left running then.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <variant>
#include <string>
#include <vector>

#include "services/nodeagent/process/spawn.hpp"

namespace mooring::nodeagent {

struct Walls {
  uid_t uid = 0;
  gid_t gid = 0;  // supplementary groups are cleared
  bool namespaces = true;
  // namespaces: an empty directory a root file system is built on (a tmpfs there, only in a
  // mount namespace of its own): the template's, when a start makes it, else the task's. The
  // host's system directories are bound read-only; the rest of the host (data dirs, other tasks,
  // /home, /var, /run) is not there at all.
  std::filesystem::path root;
  // namespaces: start on the template (made or reused here); false, or a kernel without
  // open_tree/move_mount (before 5.2): build the whole root at each start on a copy of the
  // host's mounts, as the starts before the template did.
  bool use_template = true;
  struct Bind {
    std::filesystem::path path;  // a host directory, reachable at the same path inside
    bool read_only = false;
  };
  std::vector<Bind> binds;  // the task's own directory and volumes
  // Host paths that stay hidden even where a system directory holds them (TLS files under
  // /etc): a tmpfs over a directory, /dev/null over a file.
  std::vector<std::filesystem::path> hidden;
  std::vector<int> cgroup_procs;  // cgroup.procs files the child joins before anything else
  // The keeper page (keeper_page.hpp) the init keeps the task's deadline from; -1: none, the
  // task runs until it ends or is stopped.
  int keeper_fd = -1;
  // Without namespaces: the task's cgroup directory (TaskCgroup::open_dir), through which the
  // init reaches every process of the task; -1: none, the init reaches its process group only.
  int cgroup_dir = -1;
};

struct WalledChild {
  pid_t pid = -1;   // the task's init, whose exit ends every task process
  int report = -1;  // where the init writes the task's wait status (caller closes)
};

// The failure of a step: its name and errno.
struct WallError {
  std::string step;
  int error = 0;
  std::string message() const;
};

// Starts `request` (its program, argv, env, stdio and working dir; extras and isolation are
// ignored: a walled task is always its own session) behind `walls`.
std::variant<WalledChild, WallError> spawn_walled(const SpawnRequest& request, const Walls& walls);

// After the init exited: the task's own wait status, when the init reported one. `kept`: whether
// the init had signalled the task for its keeper page's deadline.
std::optional<int> read_task_status(int report_fd, bool* kept = nullptr);

// Whether `pid` is the init of a PID namespace below ours (a walled task's init).
bool is_namespace_init(pid_t pid);
// Whether `pid` runs a task's init (walled or not): the agent's embedded image, from its memfd.
bool is_task_init(pid_t pid);

// The system directories a walled task sees read-only.
const std::vector<std::filesystem::path>& system_dirs();

}  // namespace mooring::nodeagent
