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
#include <set>

#include "services/nodeagent/process/spawn_parts.hpp"
#include "services/nodeagent/process/task_init_image.hpp"
#include "services/nodeagent/process/task_init_protocol.hpp"

namespace mooring::nodeagent {
namespace {

using namespace task_init;

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
    case kExecInit: return "exec the task's init";
  }
  return "unknown step";
}

// The mount plan: every string owned here, so the child only reads.
enum class OpKind { mkdir, touch, mount, symlink, device };
struct Op {
  OpKind kind;
  const char* a = nullptr;  // mount: source; symlink: target; else the path
  const char* b = nullptr;  // mount: target; symlink: the link
  const char* fstype = nullptr;
  unsigned long flags = 0;  // mount: its flags; device: the node's type and mode
  const char* data = nullptr;
  dev_t dev = 0;  // device: the node's device number, made root's and `gid`'s
  gid_t gid = 0;
};

struct Plan {
  explicit Plan(std::string r = {}) : root(std::move(r)) {}
  std::string root;                 // exists; directories are made below it
  std::set<std::string> made;       // directories made so far and not hidden by a mount since
  std::deque<std::string> strings;  // a deque: c_str()s stay put
  std::vector<Op> ops;
  std::vector<std::string> names;
  const char* c(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }
  void add(Op op, std::string name) {
    ops.push_back(op);
    names.push_back(std::move(name));
  }
  // One mkdir per directory the plan has not made yet (the task's root starts empty): a deep
  // volume path's parents are made once, not asked for again at each bind.
  void mkdirs(const std::string& path) {
    for (std::size_t at = root.size() + 1; at <= path.size(); ++at) {
      if (at < path.size() && path[at] != '/') continue;
      std::string dir = path.substr(0, at);
      if (made.contains(dir)) continue;
      add({OpKind::mkdir, c(dir)}, "mkdir " + dir);
      made.insert(std::move(dir));
    }
  }
  void mount(const char* source, const std::string& target, const char* fstype, unsigned long flags, const char* data,
             std::string name) {
    add({OpKind::mount, source, c(target), fstype, flags, data}, std::move(name));
    // What was made below the target is hidden by the new mount now.
    const std::string below = target + "/";
    for (auto it = made.lower_bound(below); it != made.end() && it->starts_with(below);) it = made.erase(it);
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

// A bind of the task's own directory or volume. A block volume's target is a device node, not a
// directory (asked here, in the agent, while the plan is made: nothing but system calls runs
// after the clone). The task gets a node of its own for it, in its /dev (a tmpfs where device
// nodes work), made root's and the task's group's, 0660 or 0440 for a read-only claim, and bound
// where the volume's path is: the host's node (root:disk 0660) is neither bound in nor changed,
// as Kubernetes gives a pod's fsGroup its block volumes.
void plan_bind(Plan& plan, const Walls& w, std::size_t index) {
  const auto& b = w.binds[index];
  const std::string root = w.root.string(), target = root + b.path.string();
  struct stat st {};
  const bool exists = ::stat(b.path.c_str(), &st) == 0;
  if (exists && (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode))) {
    const std::string node = root + "/dev/mooring-volume-" + std::to_string(index);
    const unsigned long mode = (st.st_mode & S_IFMT) | (b.read_only ? 0440 : 0660);
    plan.add({OpKind::device, plan.c(node), nullptr, nullptr, mode, nullptr, st.st_rdev, w.gid},
             "make the device node of " + b.path.string());
    plan.bind(node, target, false, false);
    return;
  }
  const bool dir = !exists || S_ISDIR(st.st_mode);
  plan.bind(b.path.string(), target, b.read_only, dir);
}

// The task's root: system directories read-only, hidden paths masked, a private /tmp and /dev,
// its own directories, a /proc of its PID namespace; then the tmpfs itself read-only.
Plan plan_root(const Walls& w) {
  std::string root = w.root.string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  Plan plan(root);
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
  for (std::size_t i = 0; i < w.binds.size(); ++i) plan_bind(plan, w, i);
  plan.mkdirs(root + "/proc");
  plan.mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, "mount /proc");
  plan.mount(nullptr, root, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr,
             "make the task's root read-only");
  return plan;
}

// ---- in the child: system calls only, nothing allocated, no glibc locks ----
// The child shares the agent's memory (CLONE_VM | CLONE_VFORK, as posix_spawn does) until its
// exec: no page tables copied, no copy-on-write faults. The agent's thread that started it waits;
// its other threads run on, so the child touches nothing but its arguments and its own stack.

struct ChildArgs {
  const Op* ops = nullptr;
  std::size_t op_count = 0;
  const int* cgroup_fds = nullptr;
  std::size_t cgroup_count = 0;
  // The child's 0, 1, 2, the report pipe (3), the keeper page (4) and the task init's image (5,
  // close-on-exec).
  int sources[6] = {-1, -1, -1, -1, -1, -1};
  const char* root = nullptr;
  bool namespaces = false;
  uid_t uid = 0;
  gid_t gid = 0;
  int cap_last = 40;
  const char* working_dir = nullptr;
  const char* program = nullptr;
  char* const* argv = nullptr;       // the task's
  char* const* init_argv = nullptr;  // the init's: its name, the program, the task's argv
  char* const* envp = nullptr;
};
constexpr int kInitFd = 5;

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

int run_op(const Op& op) {
  switch (op.kind) {
    case OpKind::mkdir: return ::mkdir(op.a, 0755) != 0 && errno != EEXIST ? -1 : 0;
    case OpKind::touch: {
      const int fd = ::open(op.a, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      return fd < 0 ? -1 : ::close(fd);
    }
    case OpKind::mount: return ::mount(op.a, op.b, op.fstype, op.flags, op.data);
    case OpKind::symlink: return ::symlink(op.a, op.b);
    case OpKind::device: {
      const auto mode = static_cast<mode_t>(op.flags);
      if (::mknod(op.a, mode, op.dev) != 0 || ::chown(op.a, 0, op.gid) != 0) return -1;
      return ::chmod(op.a, mode & 07777);  // mknod applied the agent's umask
    }
  }
  return -1;
}

// Raw system calls: glibc's set*id wrappers would signal the agent's other threads, which the
// child does not have.
void become_user(const ChildArgs& a) {
  if (a.uid != 0) {
    for (int cap = 0; cap <= a.cap_last; ++cap)
      if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) fail(kReportFd, kCaps);
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  }
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) fail(kReportFd, kSetgroups);
  if (::syscall(SYS_setresgid, a.gid, a.gid, a.gid) != 0) fail(kReportFd, kSetgid);
  if (::syscall(SYS_setresuid, a.uid, a.uid, a.uid) != 0) fail(kReportFd, kSetuid);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(kReportFd, kNoNewPrivs);
}

// The cgroup, then exactly 0..3, the keeper page at 4 and the init's image at 5 (3..5
// close-on-exec), nothing else.
void join_and_arrange(const ChildArgs& a) {
  for (std::size_t i = 0; i < a.cgroup_count; ++i)
    if (::write(a.cgroup_fds[i], "0", 1) != 1) fail(a.sources[kReportFd], kCgroup);
  const int count = a.sources[kInitFd] >= 0 ? 6 : 4;
  for (int target = 0; target < count; ++target)
    if (::dup2(a.sources[target], target) < 0) fail(a.sources[kReportFd], kDescriptors);
  ::syscall(SYS_close_range, static_cast<unsigned>(count), ~0U, 0U);
  for (int fd = kReportFd; fd < count; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// Every signal's disposition back to the default (the agent ignores SIGPIPE; its handlers are
// not the task's). The mask stays full: the init waits for signals instead of handling them.
void default_dispositions() {
  struct KernelSigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
  } dfl{SIG_DFL, 0, nullptr, 0};
  for (int sig = 1; sig < 65; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, 8);
}

void enter_root(const ChildArgs& a) {
  for (std::size_t i = 0; i < a.op_count; ++i)
    if (run_op(a.ops[i]) != 0) fail(kReportFd, static_cast<int>(i));
  if (::chdir(a.root) != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0 || ::umount2(".", MNT_DETACH) != 0 ||
      ::chdir("/") != 0)
    fail(kReportFd, kPivot);
}

// With namespaces the child becomes the namespace's init (task_init.cpp), which starts the task;
// without, the child becomes the task.
int child_main(void* p) {
  const auto& a = *static_cast<const ChildArgs*>(p);
  default_dispositions();
  join_and_arrange(a);
  if (::setsid() < 0) fail(kReportFd, kSetsid);
  if (a.namespaces) enter_root(a);
  become_user(a);
  if (a.working_dir && ::chdir(a.working_dir) != 0) fail(kReportFd, kChdir);
  if (!a.namespaces) {
    const unsigned long empty = 0;
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &empty, nullptr, 8);
    ::execve(a.program, a.argv, a.envp);
    fail(kReportFd, kExec);
  }
  ::fcntl(kReportFd, F_SETFD, 0);  // the init's report pipe and keeper page
  ::fcntl(kKeeperFd, F_SETFD, 0);
  ::syscall(SYS_execveat, kInitFd, "", a.init_argv, a.envp, AT_EMPTY_PATH);
  fail(kReportFd, kExecInit);
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

// Starts the child on a stack of its own, sharing the agent's memory until it execs or exits
// (then clone returns). Every signal is blocked meanwhile, as posix_spawn does: none of the
// agent's handlers may run in the child.
long clone_child(ChildArgs& a) {
  std::vector<char> stack(128 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const int ns = a.namespaces ? CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS : 0;
  const int pid = ::clone(child_main, stack.data() + stack.size(), ns | CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
  const int e = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = e;
  return pid;
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
  const int init_fd = w.namespaces ? task_init_image() : -1;
  if (w.namespaces && init_fd < 0) return WallError{"prepare the task's init", errno};

  ChildArgs a;
  parts::Owned owned;
  // Without a keeper page the init gets /dev/null there, which it cannot map: no deadline.
  const int keeper = w.namespaces && w.keeper_fd < 0 ? -2 : w.keeper_fd;
  const int sources[6] = {r.stdin_fd, r.stdout_fd, r.stderr_fd, report_w.fd, keeper, init_fd};
  for (int i = 0; i < 6; ++i) {
    a.sources[i] = sources[i] >= 0 ? owned.above(sources[i], 6) : i < 3 || sources[i] == -2 ? owned.null_above(6) : -1;
    if (a.sources[i] < 0 && (i < 4 || w.namespaces)) return WallError{"descriptors", errno};
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
  std::vector<std::string> init_argv_s{"mooring-task-init", r.program};
  init_argv_s.insert(init_argv_s.end(), r.argv.begin(), r.argv.end());
  const auto argv = parts::pointers(argv_s), envp = parts::pointers(env_s), init_argv = parts::pointers(init_argv_s);
  a.argv = argv.data();
  a.init_argv = init_argv.data();
  a.envp = envp.data();

  const long pid = clone_child(a);
  if (pid < 0) return WallError{w.namespaces ? "clone into new namespaces" : "clone", errno};
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

std::optional<int> read_task_status(int report_fd, bool* kept) {
  Report r{};
  if (read_report(report_fd, r) != static_cast<int>(sizeof r) || r.kind != kExited) return std::nullopt;
  if (kept) *kept = r.step == kKept;
  return r.status;
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
