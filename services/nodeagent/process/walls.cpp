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
#include <fstream>
#include <string_view>

#include "services/nodeagent/process/spawn_parts.hpp"
#include "services/nodeagent/process/walls_plan.hpp"
#include "services/nodeagent/process/walls_template.hpp"
#include "services/nodeagent/process/task_init_image.hpp"
#include "services/nodeagent/process/task_init_protocol.hpp"

namespace mooring::nodeagent {
namespace {

using namespace task_init;
using namespace walls_plan;

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
    case kTemplate: return "enter a copy of the walls' template";
  }
  return "unknown step";
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
  // The child's 0, 1, 2, the report pipe (3), the keeper page (4), the task init's image (5,
  // close-on-exec) and, unwalled, the task's cgroup directory (6; -1: none).
  int sources[7] = {-1, -1, -1, -1, -1, -1, -1};
  const char* root = nullptr;
  int template_ns = -1;  // namespaces: the template's mount namespace; -1: copy the host's
  bool namespaces = false;
  uid_t uid = 0;
  gid_t gid = 0;
  int cap_last = 40;
  unsigned long long ignored = 0;  // the signals the agent ignores: bit n-1 is signal n
  const char* working_dir = nullptr;
  char* const* init_argv = nullptr;  // the init's: its name, the program, the task's argv
  char* const* envp = nullptr;
};
constexpr int kInitFd = 5;

void send(int fd, const Report& r) {
  while (::write(fd, &r, sizeof r) < 0 && errno == EINTR) {
  }
}

[[noreturn]] void fail(int fd, int step) {
  send(fd, Report{kFailed, step, errno, 0});
  child_exit(127);
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

void join_cgroup(const ChildArgs& a) {
  for (std::size_t i = 0; i < a.cgroup_count; ++i)
    if (::write(a.cgroup_fds[i], "0", 1) != 1) fail(a.sources[kReportFd], kCgroup);
}

// Exactly 0..2, the report pipe at 3, the keeper page at 4, the init's image at 5 and the
// cgroup's directory at 6 when there is one (3 and up close-on-exec), nothing else.
void arrange_descriptors(const ChildArgs& a) {
  const int count = a.sources[kCgroupFd] >= 0 ? 7 : 6;
  for (int target = 0; target < count; ++target)
    if (::dup2(a.sources[target], target) < 0) fail(a.sources[kReportFd], kDescriptors);
  ::syscall(SYS_close_range, static_cast<unsigned>(count), ~0U, 0U);
  for (int fd = kReportFd; fd < count; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// Every signal's disposition back to the default: the exec resets the agent's handlers, so only
// what the agent ignores (SIGPIPE) would stay, and is reset here: one system call each instead of
// 62 (about 2 us each on these VMs: ~0.1 ms a start). The mask stays full: the init waits for
// signals instead of handling them.
void default_dispositions(unsigned long long ignored) {
  struct KernelSigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
  } dfl{SIG_DFL, 0, nullptr, 0};
  for (int sig = 1; sig < 65; ++sig)
    if ((ignored >> (sig - 1)) & 1) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, 8);
}

// On the template: a copy of it (setns puts the child at its root), then the task's part. Without:
// the whole root built on a copy of the host's mounts, pivoted into, the host's detached.
void enter_root(const ChildArgs& a) {
  const int report = a.sources[kReportFd];
  if (a.template_ns >= 0 && (::setns(a.template_ns, CLONE_NEWNS) != 0 || ::unshare(CLONE_NEWNS) != 0))
    fail(report, kTemplate);
  if (const int failed = run_ops(a.ops, a.op_count); failed >= 0) fail(report, failed);
  if (a.template_ns >= 0) return;
  if (::chdir(a.root) != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0 || ::umount2(".", MNT_DETACH) != 0 ||
      ::chdir("/") != 0)
    fail(report, kPivot);
}

// The child becomes the task's init (task_init.cpp), which starts the task: with namespaces PID 1
// of the task's, without them a subreaper that keeps the task's cgroup.
int child_main(void* p) {
  const auto& a = *static_cast<const ChildArgs*>(p);
  default_dispositions(a.ignored);
  join_cgroup(a);
  if (a.namespaces) enter_root(a);  // before the descriptors: it uses the template's and the trees'
  arrange_descriptors(a);
  if (::setsid() < 0) fail(kReportFd, kSetsid);
  become_user(a);
  if (a.working_dir && ::chdir(a.working_dir) != 0) fail(kReportFd, kChdir);
  ::fcntl(kReportFd, F_SETFD, 0);  // the init's report pipe, keeper page and cgroup
  ::fcntl(kKeeperFd, F_SETFD, 0);
  if (a.sources[kCgroupFd] >= 0) ::fcntl(kCgroupFd, F_SETFD, 0);
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

// The agent's ignored signals as the kernel shows them (SigIgn, hex): one read, where asking
// sigaction for each signal would be 64 system calls. Every one when it cannot be read.
unsigned long long ignored_signals() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("SigIgn:")) return std::stoull(line.substr(7), nullptr, 16);
  return ~0ULL;
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

// The start's mount plan. On the template: the task's part, its binds moved in from detached
// copies of its paths made here (open_tree), then everything made slave (a copy of a shared host
// mount is its peer). Without one: the whole root below w.root, on a copy of the host's mounts.
std::optional<WallError> plan_start(const Walls& w, Plan& plan, std::shared_ptr<const WallsTemplate>& base,
                                    std::vector<UniqueFd>& trees) {
  auto sources = bind_sources(w);
  if (w.use_template) {
    auto got = walls_template(w);
    if (auto* err = std::get_if<WallError>(&got)) return *err;
    if (auto* t = std::get_if<std::shared_ptr<const WallsTemplate>>(&got)) base = *t;
  }
  if (!base) {
    std::string root = w.root.string();
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    plan = plan_root(root, w.hidden, top_levels(w));
    plan_task(plan, w, sources);
    return std::nullopt;
  }
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].kind == BindSource::Kind::device) continue;
    const auto& path = w.binds[i].path;
    const int tree = ::open_tree(AT_FDCWD, path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0) return WallError{"bind " + path.string(), errno};
    sources[i].tree = trees.emplace_back(tree).fd;
  }
  plan_task(plan, w, sources);
  plan.mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr, "make the task's mounts its own (slave)");
  return std::nullopt;
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
  std::shared_ptr<const WallsTemplate> base;  // held through the start
  std::vector<UniqueFd> trees;                // detached until the child moves them in
  if (w.namespaces)
    if (auto err = plan_start(w, plan, base, trees)) return *err;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return WallError{"pipe", errno};
  UniqueFd report_r{pipe_fds[0]}, report_w{pipe_fds[1]};
  const int init_fd = task_init_image();
  if (init_fd < 0) return WallError{"prepare the task's init", errno};

  ChildArgs a;
  parts::Owned owned;
  // Without a keeper page the init gets /dev/null there, which it cannot map: no deadline. With
  // namespaces the init reaches the task's processes through its PID namespace, not the cgroup.
  const int cgroup = w.namespaces ? -1 : w.cgroup_dir;
  const int sources[7] = {r.stdin_fd, r.stdout_fd, r.stderr_fd, report_w.fd, w.keeper_fd, init_fd, cgroup};
  for (int i = 0; i < 7; ++i) {
    a.sources[i] = sources[i] >= 0 ? owned.above(sources[i], 7) : i < 5 ? owned.null_above(7) : -1;
    if (a.sources[i] < 0 && i < 6) return WallError{"descriptors", errno};
  }
  a.ops = plan.ops.data();
  a.op_count = plan.ops.size();
  a.cgroup_fds = w.cgroup_procs.data();
  a.cgroup_count = w.cgroup_procs.size();
  const std::string working_dir = r.working_dir.string();
  a.root = plan.root.c_str();
  a.template_ns = base ? base->ns.fd : -1;
  a.namespaces = w.namespaces;
  a.uid = w.uid;
  a.gid = w.gid;
  a.cap_last = cap_last();
  a.ignored = ignored_signals();
  a.working_dir = working_dir.empty() ? nullptr : working_dir.c_str();
  std::vector<std::string> env_s = parts::environment(r.env);
  std::vector<std::string> init_argv_s{kTaskInitName, r.program};
  init_argv_s.insert(init_argv_s.end(), r.argv.begin(), r.argv.end());
  const auto envp = parts::pointers(env_s), init_argv = parts::pointers(init_argv_s);
  a.init_argv = init_argv.data();
  a.envp = envp.data();

  const int ns = !w.namespaces ? 0 : CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (base ? 0 : CLONE_NEWNS);
  const long pid = clone_sharing_memory(child_main, ns, &a);
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
  return WalledChild{static_cast<pid_t>(pid), report_r.release()};
}

std::optional<int> read_task_status(int report_fd, bool* kept) {
  Report r{};
  if (read_report(report_fd, r) != static_cast<int>(sizeof r) || r.kind != kExited) return std::nullopt;
  if (kept) *kept = r.step == kKept;
  return r.status;
}

bool is_task_init(pid_t pid) {
  char link[128];
  const std::string path = "/proc/" + std::to_string(pid) + "/exe";
  const auto n = ::readlink(path.c_str(), link, sizeof link - 1);
  return n > 0 &&
         std::string_view(link, static_cast<std::size_t>(n)).starts_with(std::string("/memfd:") + kTaskInitName);
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
