#include "services/nodeagent/process/walls.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include "services/nodeagent/process/spawn_parts.hpp"

namespace mooring::nodeagent {
namespace {

// What the init (or the plain child) tells the agent through the report pipe.
struct Report {
  int kind = 0;  // kStarted, kFailed, kExited
  int step = 0;  // kFailed: an op index (>= 0) or a Step
  int error = 0;
  int status = 0;  // kExited: the task's wait status
};
constexpr int kStarted = 1, kFailed = 2, kExited = 3;

// Steps besides the mount plan's, named for the error.
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
};
const char* step_name(int step) {
  switch (step) {
    case kCgroup: return "join the task's cgroup";
    case kSetsid: return "setsid";
    case kDescriptors: return "set up the task's descriptors";
    case kPivot: return "pivot_root into the task's root";
    case kCaps: return "drop capabilities";
    case kSetgroups: return "clear supplementary groups";
    case kSetgid: return "setresgid";
    case kSetuid: return "setresuid";
    case kNoNewPrivs: return "set no_new_privs";
    case kFork: return "fork the task";
    case kChdir: return "chdir to the working directory";
    case kExec: return "exec";
  }
  return "unknown step";
}

// The mount plan: every string owned here, so the child only reads.
enum class OpKind { mkdirs, touch, mount, symlink };
struct Op {
  OpKind kind;
  const char* a = nullptr;  // mount: source; symlink: target; else the path
  const char* b = nullptr;  // mount: target; symlink: the link
  const char* fstype = nullptr;
  unsigned long flags = 0;
  const char* data = nullptr;
};

struct Plan {
  std::deque<std::string> strings;  // a deque: c_str()s stay put
  std::vector<Op> ops;
  std::vector<std::string> names;
  const char* c(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }
  void add(Op op, std::string name) {
    ops.push_back(op);
    names.push_back(std::move(name));
  }
  void mkdirs(const std::string& path) { add({OpKind::mkdirs, c(path)}, "mkdir " + path); }
  void mount(const char* source, const std::string& target, const char* fstype, unsigned long flags, const char* data,
             std::string name) {
    add({OpKind::mount, source, c(target), fstype, flags, data}, std::move(name));
  }
  void bind(const std::string& source, const std::string& target, bool read_only, bool dir = true) {
    if (dir)
      mkdirs(target);
    else {
      mkdirs(std::filesystem::path(target).parent_path().string());
      add({OpKind::touch, c(target)}, "create " + target);
    }
    mount(c(source), target, nullptr, MS_BIND | MS_REC, nullptr, "bind " + source);
    if (read_only)
      mount(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr,
            "make " + source + " read-only");
  }
};

bool under(const std::filesystem::path& p, const std::filesystem::path& dir) {
  auto rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

void plan_dev(Plan& plan, const std::string& root) {
  plan.mkdirs(root + "/dev");
  plan.mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k", "tmpfs on /dev");
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"})
    plan.bind(std::string("/dev/") + node, root + "/dev/" + node, false, false);
  for (const auto& [link, target] : {std::pair{"fd", "/proc/self/fd"}, std::pair{"stdin", "/proc/self/fd/0"},
                                     std::pair{"stdout", "/proc/self/fd/1"}, std::pair{"stderr", "/proc/self/fd/2"}})
    plan.add({OpKind::symlink, target, plan.c(root + "/dev/" + link)}, std::string("symlink /dev/") + link);
  plan.mkdirs(root + "/dev/shm");
  plan.mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", "tmpfs on /dev/shm");
}

// The task's root: system directories read-only, hidden paths masked, a private /tmp and /dev,
// its own directories, a /proc of its PID namespace; then the tmpfs itself read-only.
Plan plan_root(const Walls& w) {
  Plan plan;
  const std::string root = w.root.string();
  plan.mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr, "make the task's mounts its own (slave)");
  plan.mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m", "tmpfs on the task's root");
  for (const auto& dir : system_dirs()) {
    std::error_code ec;
    const auto st = std::filesystem::symlink_status(dir, ec);
    if (ec) continue;
    if (std::filesystem::is_symlink(st)) {
      const auto target = std::filesystem::read_symlink(dir, ec);
      if (!ec)
        plan.add({OpKind::symlink, plan.c(target.string()), plan.c(root + dir.string())}, "symlink " + dir.string());
    } else if (std::filesystem::is_directory(st)) {
      plan.bind(dir.string(), root + dir.string(), true);
    }
  }
  for (const auto& hidden : w.hidden) {
    std::error_code ec;
    const auto target = std::filesystem::weakly_canonical(hidden, ec);
    if (ec || !std::filesystem::exists(target, ec)) continue;
    bool inside = false;
    for (const auto& dir : system_dirs()) inside = inside || under(target, std::filesystem::weakly_canonical(dir, ec));
    if (!inside) continue;  // not in the task's root at all
    if (std::filesystem::is_directory(target, ec))
      plan.mount("tmpfs", root + target.string(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "mode=0,size=4k", "mask " + target.string());
    else
      plan.mount("/dev/null", root + target.string(), nullptr, MS_BIND, nullptr, "mask " + target.string());
  }
  plan_dev(plan, root);
  plan.mkdirs(root + "/tmp");
  plan.mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", "tmpfs on /tmp");
  // A block volume's target is a device node, not a directory: its mount point is a file. Asked
  // here, in the agent, while the plan is made (nothing but system calls runs after the clone).
  for (const auto& b : w.binds) {
    std::error_code ec;
    const bool dir = !std::filesystem::exists(b.path, ec) || std::filesystem::is_directory(b.path, ec);
    plan.bind(b.path.string(), root + b.path.string(), b.read_only, dir);
  }
  plan.mkdirs(root + "/proc");
  plan.mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, "mount /proc");
  plan.mount(nullptr, root, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr,
             "make the task's root read-only");
  return plan;
}

// ---- in the child: system calls only, nothing allocated, no glibc locks ----

struct ChildArgs {
  const Op* ops = nullptr;
  std::size_t op_count = 0;
  const int* cgroup_fds = nullptr;
  std::size_t cgroup_count = 0;
  int sources[4] = {-1, -1, -1, -1};  // the child's 0, 1, 2 and the report pipe (3)
  const char* root = nullptr;
  bool namespaces = false;
  uid_t uid = 0;
  gid_t gid = 0;
  int cap_last = 40;
  const char* working_dir = nullptr;
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

[[noreturn]] void die(int code) {
  ::syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

void send(int fd, const Report& r) {
  while (::write(fd, &r, sizeof r) < 0 && errno == EINTR) {
  }
}

[[noreturn]] void fail(int fd, int step) {
  send(fd, Report{kFailed, step, errno, 0});
  die(127);
}

int mkdirs(const char* path) {
  char buf[4096];
  std::size_t n = 0;
  for (; path[n] != '\0'; ++n) {
    if (n + 1 >= sizeof buf) return errno = ENAMETOOLONG, -1;
    buf[n] = path[n];
  }
  buf[n] = '\0';
  for (std::size_t i = 1; i <= n; ++i) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    const char saved = buf[i];
    buf[i] = '\0';
    if (::mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    buf[i] = saved;
  }
  return 0;
}

int run_op(const Op& op) {
  switch (op.kind) {
    case OpKind::mkdirs: return mkdirs(op.a);
    case OpKind::touch: {
      const int fd = ::open(op.a, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      return fd < 0 ? -1 : ::close(fd);
    }
    case OpKind::mount: return ::mount(op.a, op.b, op.fstype, op.flags, op.data);
    case OpKind::symlink: return ::symlink(op.a, op.b);
  }
  return -1;
}

// Raw system calls: glibc's set*id wrappers would signal the agent's other threads, which the
// child does not have.
void become_user(const ChildArgs& a) {
  if (a.uid != 0) {
    for (int cap = 0; cap <= a.cap_last; ++cap)
      if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) fail(3, kCaps);
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  }
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) fail(3, kSetgroups);
  if (::syscall(SYS_setresgid, a.gid, a.gid, a.gid) != 0) fail(3, kSetgid);
  if (::syscall(SYS_setresuid, a.uid, a.uid, a.uid) != 0) fail(3, kSetuid);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(3, kNoNewPrivs);
}

// The cgroup, then exactly 0..3 (3: the report pipe, close-on-exec), nothing else.
void join_and_arrange(const ChildArgs& a) {
  for (std::size_t i = 0; i < a.cgroup_count; ++i)
    if (::write(a.cgroup_fds[i], "0", 1) != 1) fail(a.sources[3], kCgroup);
  for (int target = 0; target < 4; ++target)
    if (::dup2(a.sources[target], target) < 0) fail(a.sources[3], kDescriptors);
  ::syscall(SYS_close_range, 4U, ~0U, 0U);
  ::fcntl(3, F_SETFD, FD_CLOEXEC);
}

[[noreturn]] void exec_task(const ChildArgs& a, int report) {
  struct KernelSigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
  } dfl{SIG_DFL, 0, nullptr, 0};
  for (int sig = 1; sig < 65; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, 8);
  const unsigned long empty = 0;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &empty, nullptr, 8);
  if (a.working_dir && ::chdir(a.working_dir) != 0) fail(report, kChdir);
  ::execve(a.program, a.argv, a.envp);
  fail(report, kExec);
}

// The task's stack between the init's clone and its exec. The task shares the init's memory
// (CLONE_VM | CLONE_VFORK, as posix_spawn does) instead of a copy of it: no page tables to
// copy and no copy-on-write faults (with their TLB shootdowns, costly on a VM) in a start.
// Each init has its own copy of this buffer (the agent never touches it), so nothing is
// allocated after the first clone.
alignas(64) char g_task_stack[256 * 1024];

struct TaskStart {
  const ChildArgs* args;
  int report;
};

int start_task(void* p) {
  const auto* s = static_cast<const TaskStart*>(p);
  ::setpgid(0, 0);  // its own group: a signal to the init's group reaches the init only
  exec_task(*s->args, s->report);
}

// PID 1 of the task's namespace: forwards signals to every process in it, reaps orphans, and
// exits (taking them all along) when the task does.
[[noreturn]] void init_loop(pid_t task) {
  unsigned long all = ~0UL;
  for (;;) {
    siginfo_t info{};
    const long sig = ::syscall(SYS_rt_sigtimedwait, &all, &info, nullptr, 8);
    if (sig < 0) continue;
    if (sig != SIGCHLD) {
      ::kill(-1, static_cast<int>(sig));
      continue;
    }
    int st = 0;
    for (pid_t p; (p = static_cast<pid_t>(::syscall(SYS_wait4, -1, &st, WNOHANG, nullptr))) > 0;) {
      if (p != task) continue;
      send(3, Report{kExited, 0, 0, st});
      die(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
  }
}

[[noreturn]] void child_main(const ChildArgs& a) {
  const unsigned long all = ~0UL;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, nullptr, 8);  // the init waits for them instead
  join_and_arrange(a);
  if (::setsid() < 0) fail(3, kSetsid);
  if (!a.namespaces) {
    become_user(a);
    exec_task(a, 3);
  }
  for (std::size_t i = 0; i < a.op_count; ++i)
    if (run_op(a.ops[i]) != 0) fail(3, static_cast<int>(i));
  if (::chdir(a.root) != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0 || ::umount2(".", MNT_DETACH) != 0 ||
      ::chdir("/") != 0)
    fail(3, kPivot);
  become_user(a);
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) fail(3, kFork);
  TaskStart start{&a, sync[1]};
  // Returns once the task has exec'd or failed (CLONE_VFORK).
  const int task = ::clone(start_task, g_task_stack + sizeof g_task_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  if (task < 0) fail(3, kFork);
  ::close(sync[1]);
  for (int fd = 0; fd < 3; ++fd) ::close(fd);
  Report r{};
  const auto n = ::read(sync[0], &r, sizeof r);
  if (n == static_cast<ssize_t>(sizeof r)) {
    send(3, r);
    die(127);  // the kernel kills nothing else: the task never ran
  }
  ::close(sync[0]);
  send(3, Report{kStarted, 0, 0, 0});
  init_loop(static_cast<pid_t>(task));
}

int read_report(int fd, Report& r) {
  std::size_t got = 0;
  while (got < sizeof r) {
    const auto n = ::read(fd, reinterpret_cast<char*>(&r) + got, sizeof r - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<int>(got);
}

// Read once: it is the running kernel's, and each start would otherwise open a file for it.
int cap_last() {
  static const int last = [] {
    std::ifstream in("/proc/sys/kernel/cap_last_cap");
    int v = 40;
    in >> v;
    return v;
  }();
  return last;
}

}  // namespace

std::string WallError::message() const { return step + ": " + std::strerror(error); }

const std::vector<std::filesystem::path>& system_dirs() {
  static const std::vector<std::filesystem::path> dirs{"/bin",   "/sbin",   "/lib", "/lib32",
                                                       "/lib64", "/libx32", "/usr", "/etc"};
  return dirs;
}

std::variant<WalledChild, WallError> spawn_walled(const SpawnRequest& r, const Walls& w) {
  if (r.program.empty() || r.argv.empty()) return WallError{"exec", EINVAL};
  Plan plan;
  if (w.namespaces) plan = plan_root(w);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return WallError{"pipe", errno};
  UniqueFd report_r{pipe_fds[0]}, report_w{pipe_fds[1]};

  ChildArgs a;
  parts::Owned owned;
  const int sources[4] = {r.stdin_fd, r.stdout_fd, r.stderr_fd, report_w.fd};
  for (int i = 0; i < 4; ++i) {
    a.sources[i] = sources[i] >= 0 ? owned.above(sources[i], 4) : owned.null_above(4);
    if (a.sources[i] < 0) return WallError{"descriptors", errno};
  }
  a.ops = plan.ops.data();
  a.op_count = plan.ops.size();
  a.cgroup_fds = w.cgroup_procs.data();
  a.cgroup_count = w.cgroup_procs.size();
  const std::string root = w.root.string(), working_dir = r.working_dir.string();
  a.root = root.c_str();
  a.namespaces = w.namespaces;
  a.uid = w.uid;
  a.gid = w.gid;
  a.cap_last = cap_last();
  a.working_dir = working_dir.empty() ? nullptr : working_dir.c_str();
  a.program = r.program.c_str();
  std::vector<std::string> argv_s = r.argv, env_s = parts::environment(r.env);
  const auto argv = parts::pointers(argv_s), envp = parts::pointers(env_s);
  a.argv = argv.data();
  a.envp = envp.data();

  const unsigned long flags = w.namespaces ? CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS : 0;
  const long pid = ::syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
  if (pid < 0) return WallError{w.namespaces ? "clone into new namespaces" : "fork", errno};
  if (pid == 0) child_main(a);
  report_w.close();
  owned.close_all();  // the child's copies: EOF on the report pipe once the task has exec'd

  Report rep{};
  const int n = read_report(report_r.fd, rep);
  if (n == static_cast<int>(sizeof rep) && rep.kind == kFailed) {
    int st = 0;
    ::waitpid(static_cast<pid_t>(pid), &st, 0);
    std::string step = rep.step >= 0 && static_cast<std::size_t>(rep.step) < plan.names.size() ? plan.names[rep.step]
                                                                                               : step_name(rep.step);
    if (rep.step == kExec) step += " " + r.program;
    return WallError{step, rep.error};
  }
  WalledChild out{static_cast<pid_t>(pid), -1};
  if (w.namespaces) out.report = report_r.release();
  return out;
}

std::optional<int> read_task_status(int report_fd) {
  Report r{};
  if (read_report(report_fd, r) == static_cast<int>(sizeof r) && r.kind == kExited) return r.status;
  return std::nullopt;
}

bool is_namespace_init(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("NSpid:")) continue;
    return line.size() > 2 && line.ends_with("\t1") && line.find('\t') != line.rfind('\t');
  }
  return false;
}

}  // namespace mooring::nodeagent
