// What a walled task's init (task_init.cpp, PID 1 of the task's namespaces) and the agent's start
// (walls.cpp) tell each other through the report pipe, the init's descriptor 3. Plain data: the
// init is a small static program without the C++ library.
#pragma once

namespace mooring::nodeagent::task_init {

// One message: the task started, a step failed, or the task exited with a wait status.
struct Report {
  int kind = 0;  // kStarted, kFailed, kExited
  int step = 0;  // kFailed: an op index of the mount plan (>= 0) or a Step; kExited: kKept or 0
  int error = 0;
  int status = 0;  // kExited: the task's wait status
};
constexpr int kStarted = 1, kFailed = 2, kExited = 3;
constexpr int kKept = 1;  // kExited: the init had signalled the task for its keeper page's deadline

// The steps of a start besides the mount plan's, named by walls.cpp for the error.
enum Step : int {
  kCgroup = -1,
  kSetsid = -2,
  kDescriptors = -3,
  kPivot = -4,
  kCaps = -5,
  kSetgroups = -6,
  kSetgid = -7,
  kSetuid = -8,
  kNoNewPrivs = -9,
  kFork = -10,
  kChdir = -11,
  kExec = -12,
  kExecInit = -13,
  kTemplate = -14,
};

constexpr int kReportFd = 3;

// The keeper page (issue 43): a one-page memfd at the init's descriptor 4 (close-on-exec for the
// task) that the agent keeps pushing forward while the control plane hears it. Past term_at the
// init SIGTERMs every process of its namespace, past kill_at it SIGKILLs them: a task whose agent
// is dead stops before the control plane can free its claims. CLOCK_MONOTONIC nanoseconds; a
// kill_at of 0 means no deadline. The agent stores kill_at before term_at (both atomically), so
// an init that sees a new term_at sees its kill_at too.
struct KeeperPageLayout {
  long long term_at_ns = 0;
  long long kill_at_ns = 0;
};
constexpr int kKeeperFd = 4;
constexpr unsigned long kKeeperPageSize = 4096;

// An unwalled task's init (no PID namespace: it is not PID 1) reaches every process of the task
// through the task's cgroup, whose directory it gets on descriptor 6 (close-on-exec for the task):
// each pid in its cgroup.procs but its own. Without one, the task's process group.
constexpr int kCgroupFd = 6;

}  // namespace mooring::nodeagent::task_init
