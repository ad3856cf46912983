// A task's cgroup (issue 41): its CPU and memory limits, its OOM kills, and the one place where
// every process of the task can be found again, double-forked or not, also by an agent that
// restarted (the cgroup is named after the allocation). cgroup v2 when it is mounted at
// /sys/fs/cgroup, else v1 (the memory, cpu, pids and freezer hierarchies; this project's machines
// run v1). Made under the agent's own cgroup, in a `mooring` group of its own.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

namespace mooring::nodeagent {

struct CgroupLimits {
  int cpu_millicores = 0;  // 0: no limit; else a CFS quota of this share of one CPU, and weight
  int memory_mb = 0;       // 0: no limit; else memory (and memory+swap where v1 has it)
};

class TaskCgroup {
 public:
  // Makes (or finds) the cgroup `name` and sets its limits; an error names the file.
  static std::variant<TaskCgroup, std::string> create(const std::string& name, const CgroupLimits& limits);
  // The cgroup `name` as an earlier agent made it (no directory made); empty() when there is none.
  static TaskCgroup find(const std::string& name);

  bool empty() const { return dirs_.empty(); }
  bool v2() const { return v2_; }
  // cgroup.procs of each hierarchy, opened for writing (close-on-exec; the caller closes): a
  // child writes "0" to each to join before it does anything else.
  std::vector<int> open_procs() const;
  // Its directory (v1: the first hierarchy's; each holds the same processes), read-only and
  // close-on-exec (the caller closes); -1 when it cannot be opened. An unwalled task's init
  // reads cgroup.procs through it (walls.hpp, Walls::cgroup_dir).
  int open_dir() const;
  // Every process in it (pids as the agent sees them).
  std::vector<pid_t> processes() const;
  // How many processes the kernel's OOM killer has killed in it.
  int oom_kills() const;
  // Freezes it, SIGKILLs every process, thaws, until none is left (or `attempts` rounds passed);
  // true when it is empty.
  bool kill_all(int attempts = 50) const;
  // Removes the directories (after kill_all).
  void remove() const;

 private:
  std::vector<std::filesystem::path> dirs_;  // v1: one per hierarchy, memory first; v2: one
  bool v2_ = false;
};

}  // namespace mooring::nodeagent
