// The init of a task (issues 41 and 43), exec'd by the agent's start once the task's user and
// working directory (and, walled, its namespaces and root) are set up (walls.cpp). It starts the
// task, forwards signals to every process of the task, reaps orphans, reports the task's wait
// status on descriptor 3 and exits with the task. It also keeps the deadline of the keeper page on
// descriptor 4 (task_init_protocol.hpp): it outlives a dead agent, so it stops the task on its own
// in time. Walled, it is PID 1 of the task's PID namespace: "every process" is the namespace's,
// and the kernel kills what the task left behind when the init exits. Unwalled (no namespaces),
// it is a subreaper in the host's, and "every process" is every other one in the task's cgroup
// (descriptor 6), which it also kills when the task exits. A program of its own, embedded in the
// agent (task_init_image.cpp), so that the agent's start is a vfork and an exec instead of a copy
// of the agent's memory; without the C library (raw system calls, its own _start), because a
// static glibc's start-up cost as much as the task's exec (bench/README.md, "The task floor with
// walls").
//
// argv: [name, program, the task's argv...]; the task's environment; every signal blocked.
#include <asm/unistd.h>
#include <fcntl.h>
#include <linux/prctl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstddef>

#include "services/nodeagent/process/task_init_protocol.hpp"

#if !defined(__x86_64__)
#error "task_init.cpp makes x86-64 system calls; another architecture needs its own sys() and _start"
#endif

namespace {

using namespace mooring::nodeagent::task_init;

long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  long ret;
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  register long r9 asm("r9") = f;
  asm volatile("syscall"
               : "=a"(ret)
               : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return ret;
}

long long monotonic_ns() {
  struct timespec ts {};
  sys(__NR_clock_gettime, CLOCK_MONOTONIC, reinterpret_cast<long>(&ts));
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

[[noreturn]] void exit_now(int code) {
  sys(__NR_exit_group, code);
  __builtin_unreachable();
}

void send(const Report& r) {
  while (sys(__NR_write, kReportFd, reinterpret_cast<long>(&r), sizeof r) == -EINTR) {
  }
}

// The task's start: a child that shares this process's memory until its exec (CLONE_VM |
// CLONE_VFORK, as posix_spawn does), on a stack of its own: no page tables copied, no
// copy-on-write faults, and the init waits for the exec without a pipe. Its exec's errno comes
// back in `exec_error`.
struct TaskStart {
  char** argv;
  char** envp;
  int exec_error;
};
alignas(16) char task_stack[16384];  // one child at a time: the init waits for its exec

extern "C" [[noreturn, gnu::used]] void task_child(TaskStart* start) {
  sys(__NR_setpgid, 0, 0);  // its own group: a signal to the init's group reaches the init only
  const unsigned long none = 0;
  sys(__NR_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&none), 0, sizeof none);
  const long rc = sys(__NR_execve, reinterpret_cast<long>(start->argv[1]), reinterpret_cast<long>(start->argv + 2),
                      reinterpret_cast<long>(start->envp));
  start->exec_error = static_cast<int>(-rc);
  exit_now(127);
}

// Returns the task's pid, or -errno. The child starts on task_stack in task_child(start) (r12
// survives the system call); the init resumes once the child has exec'd or exited.
long start_task(TaskStart& start) {
  start.exec_error = 0;
  long ret;
  register long r10 asm("r10") = 0;
  register long r8 asm("r8") = 0;
  register TaskStart* arg asm("r12") = &start;
  asm volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "mov %%r12, %%rdi\n\t"
      "call task_child\n\t"
      "hlt\n"
      "1:"
      : "=a"(ret)
      : "a"(__NR_clone), "D"(CLONE_VM | CLONE_VFORK | SIGCHLD), "S"(task_stack + sizeof task_stack), "d"(0), "r"(r10),
        "r"(r8), "r"(arg)
      : "rcx", "r11", "memory");
  return ret;
}

// Who "every process of the task" is: walled, the PID namespace's (kill(-1) spares the init);
// unwalled, every other process in the task's cgroup; without a cgroup, the task's process group
// (what leaves it, by setsid or setpgid, escapes).
struct Target {
  bool pid_namespace = false;
  long cgroup = -1;  // the cgroup's directory (kCgroupFd); -1: none
  long self = 0;
  long task = 0;

  // Sends `sig` to every process of the cgroup but this one; how many it signalled.
  int signal_cgroup(int sig) const {
    const long fd = sys(__NR_openat, cgroup, reinterpret_cast<long>("cgroup.procs"), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[2048];
    long pid = -1;
    int count = 0;
    for (long n; (n = sys(__NR_read, fd, reinterpret_cast<long>(buf), sizeof buf)) > 0;) {
      for (long i = 0; i < n; ++i) {
        if (buf[i] >= '0' && buf[i] <= '9') {
          pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
          continue;
        }
        if (pid > 0 && pid != self && sys(__NR_kill, pid, sig) == 0) ++count;
        pid = -1;
      }
    }
    if (pid > 0 && pid != self && sys(__NR_kill, pid, sig) == 0) ++count;
    sys(__NR_close, fd);
    return count;
  }

  void signal(int sig) const {
    if (pid_namespace)
      sys(__NR_kill, -1, sig);
    else if (cgroup >= 0)
      signal_cgroup(sig);
    else
      sys(__NR_kill, -task, sig);
  }

  // SIGKILL until nothing else is left in the cgroup: a process may fork between the read of
  // cgroup.procs and its kill, so rounds follow (1 ms apart, a few seconds at most: a process in
  // an uninterruptible sleep dies when it wakes).
  void kill_all() const {
    if (pid_namespace || cgroup < 0) return signal(SIGKILL);
    for (int round = 0; round < 3000 && signal_cgroup(SIGKILL) > 0; ++round) {
      struct timespec ms {
        0, 1000000
      };
      sys(__NR_nanosleep, reinterpret_cast<long>(&ms), 0);
    }
  }
};

// The keeper page's deadline, as far as it has come: once the SIGTERM went out, the SIGKILL time
// it had is kept (an agent heard again later does not call a stop half done off).
struct Keeper {
  const KeeperPageLayout* page = nullptr;  // null: no page, no deadline
  const Target* target = nullptr;
  bool termed = false, killed = false;
  long long kill_at = 0;

  // Signals what is due; returns the nanoseconds until the next deadline (or -1: none).
  long long step(long long now) {
    if (!page || killed) return -1;
    if (!termed) {
      const long long term = __atomic_load_n(&page->term_at_ns, __ATOMIC_SEQ_CST);
      const long long kill = __atomic_load_n(&page->kill_at_ns, __ATOMIC_SEQ_CST);
      if (kill == 0) return -1;
      if (now < term) return term - now;
      target->signal(SIGTERM);  // every process of the task but this one
      termed = true;
      kill_at = kill;
    }
    if (now < kill_at) return kill_at - now;
    target->kill_all();
    killed = true;
    return -1;
  }
};

// Forwards every signal to the task's processes and keeps the deadline (waking at least once a
// second to read the page); returns the task's wait status.
int wait_for(long task, Keeper& keeper) {
  const unsigned long all = ~0UL;
  for (;;) {
    const long long next = keeper.step(monotonic_ns());
    const long long wait = next < 0 || next > 1000000000LL ? 1000000000LL : next;
    struct timespec ts {
      wait / 1000000000LL, wait % 1000000000LL
    };
    const long sig =
        sys(__NR_rt_sigtimedwait, reinterpret_cast<long>(&all), 0, reinterpret_cast<long>(&ts), sizeof all);
    if (sig < 0) continue;
    if (sig != SIGCHLD) {
      keeper.target->signal(static_cast<int>(sig));
      continue;
    }
    int st = 0;
    for (long p; (p = sys(__NR_wait4, -1, reinterpret_cast<long>(&st), WNOHANG, 0)) > 0;)
      if (p == task) return st;
  }
}

// The page on descriptor 4, read-only here; close-on-exec, so the task never gets it.
const KeeperPageLayout* map_keeper() {
  sys(__NR_fcntl, kKeeperFd, F_SETFD, FD_CLOEXEC);
  const long at = sys(__NR_mmap, 0, kKeeperPageSize, PROT_READ, MAP_SHARED, kKeeperFd, 0);
  return at < 0 && at > -4096 ? nullptr : reinterpret_cast<const KeeperPageLayout*>(at);
}

}  // namespace

extern "C" [[noreturn]] void task_init_main(long* stack) {
  const long argc = stack[0];
  char** argv = reinterpret_cast<char**>(stack + 1);
  char** envp = argv + argc + 1;
  if (argc < 3) exit_now(127);
  // Not dumpable: the task runs as the same user, and an exec after the user switch made this
  // process dumpable again, so the task could ptrace it (and write the reports) or read its
  // /proc entries. The task's own exec makes the task dumpable as usual.
  sys(__NR_prctl, PR_SET_DUMPABLE, 0);
  sys(__NR_fcntl, kReportFd, F_SETFD, FD_CLOEXEC);  // the task does not get it
  Target target;
  target.self = sys(__NR_getpid);
  target.pid_namespace = target.self == 1;
  if (!target.pid_namespace) {
    // Orphans of the task come to this process, not to the host's init: they are the task's.
    sys(__NR_prctl, PR_SET_CHILD_SUBREAPER, 1);
    if (sys(__NR_fcntl, kCgroupFd, F_SETFD, FD_CLOEXEC) == 0) target.cgroup = kCgroupFd;
  }
  Keeper keeper{map_keeper(), &target};
  TaskStart start{argv, envp, 0};
  const long task = start_task(start);
  target.task = task;
  if (task < 0 || start.exec_error != 0) {
    send(Report{kFailed, task < 0 ? kFork : kExec, task < 0 ? static_cast<int>(-task) : start.exec_error, 0});
    exit_now(127);  // nothing else runs in the namespace: the task never did
  }
  for (int fd = 0; fd < 3; ++fd) sys(__NR_close, fd);  // the task's stdio ends when the task's does
  send(Report{kStarted, 0, 0, 0});
  const int st = wait_for(task, keeper);
  // Walled, the kernel ends the namespace's other processes with this one; unwalled, this does.
  if (!target.pid_namespace) target.kill_all();
  send(Report{kExited, keeper.termed ? kKept : 0, 0, st});
  exit_now(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

// The kernel enters here with argc, argv and envp on the stack.
asm(".text\n"
    ".global _start\n"
    "_start:\n"
    "  xor %rbp, %rbp\n"
    "  mov %rsp, %rdi\n"
    "  and $-16, %rsp\n"
    "  call task_init_main\n"
    "  hlt\n");
