// The init of a walled task's PID namespace (issue 41), exec'd by the agent's start once the
// task's namespaces, root, user and working directory are set up (walls.cpp). It starts the
// task, forwards signals to every process of the namespace, reaps orphans, reports the task's
// wait status on descriptor 3 and exits with the task; the kernel then kills whatever the task
// left behind. It also keeps the deadline of the keeper page on descriptor 4 (issue 43,
// task_init_protocol.hpp): it outlives a dead agent, so it stops the task on its own in time. A program of its own, embedded in the agent (task_init_image.cpp), so that the
// agent's start is a vfork and an exec instead of a copy of the agent's memory; without the C
// library (raw system calls, its own _start), because a static glibc's start-up cost as much as
// the task's exec (bench/README.md, "The task floor with walls").
//
// argv: [name, program, the task's argv...]; the task's environment; every signal blocked.
#include <asm/unistd.h>
#include <fcntl.h>
#include <linux/prctl.h>
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

// Starts the task (a fork of this small process); its exec's errno comes back through a
// close-on-exec pipe, EOF meaning it exec'd. Returns the task's pid, or -errno.
long start_task(char** argv, char** envp, int& exec_error) {
  int sync[2];
  if (long rc = sys(__NR_pipe2, reinterpret_cast<long>(sync), O_CLOEXEC); rc < 0) return rc;
  const long pid = sys(__NR_fork);
  if (pid == 0) {
    sys(__NR_setpgid, 0, 0);  // its own group: a signal to the init's group reaches the init only
    const unsigned long none = 0;
    sys(__NR_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&none), 0, sizeof none);
    const long rc = sys(__NR_execve, reinterpret_cast<long>(argv[1]), reinterpret_cast<long>(argv + 2),
                        reinterpret_cast<long>(envp));
    const int e = static_cast<int>(-rc);
    sys(__NR_write, sync[1], reinterpret_cast<long>(&e), sizeof e);
    exit_now(127);
  }
  sys(__NR_close, sync[1]);
  exec_error = 0;
  if (pid > 0)
    while (sys(__NR_read, sync[0], reinterpret_cast<long>(&exec_error), sizeof exec_error) == -EINTR) {
    }
  sys(__NR_close, sync[0]);
  return pid;
}

// The keeper page's deadline, as far as it has come: once the SIGTERM went out, the SIGKILL time
// it had is kept (an agent heard again later does not call a stop half done off).
struct Keeper {
  const KeeperPageLayout* page = nullptr;  // null: no page, no deadline
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
      sys(__NR_kill, -1, SIGTERM);  // every process of the namespace but this one
      termed = true;
      kill_at = kill;
    }
    if (now < kill_at) return kill_at - now;
    sys(__NR_kill, -1, SIGKILL);
    killed = true;
    return -1;
  }
};

// Forwards every signal to the namespace's processes and keeps the deadline (waking at least once
// a second to read the page); returns the task's wait status.
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
      sys(__NR_kill, -1, sig);
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
  Keeper keeper{map_keeper()};
  int exec_error = 0;
  const long task = start_task(argv, envp, exec_error);
  if (task < 0 || exec_error != 0) {
    send(Report{kFailed, task < 0 ? kFork : kExec, task < 0 ? static_cast<int>(-task) : exec_error, 0});
    exit_now(127);  // nothing else runs in the namespace: the task never did
  }
  for (int fd = 0; fd < 3; ++fd) sys(__NR_close, fd);  // the task's stdio ends when the task's does
  send(Report{kStarted, 0, 0, 0});
  const int st = wait_for(task, keeper);
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
