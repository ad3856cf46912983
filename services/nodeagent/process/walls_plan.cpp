#include "services/nodeagent/process/walls_plan.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace mooring::nodeagent::walls_plan {
namespace {

namespace fs = std::filesystem;

// The directory each device volume's node of the task's own is made in: a tmpfs of the task's
// (device nodes work there), mounted on the base's empty directory.
constexpr const char* kDeviceDir = "/dev/mooring-volumes";

bool under(const fs::path& p, const fs::path& dir) {
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
  plan.mkdirs(root + kDeviceDir);
  // Shared by every task's copy of the template: nothing a task does may change it.
  plan.mount(nullptr, root + "/dev", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, nullptr,
             "make /dev read-only");
}

void plan_system_dirs(Plan& plan, const std::string& root) {
  for (const auto& dir : system_dirs()) {
    std::error_code ec;
    const auto st = fs::symlink_status(dir, ec);
    if (ec) continue;
    if (fs::is_symlink(st)) {
      const auto target = fs::read_symlink(dir, ec);
      if (!ec)
        plan.add({OpKind::symlink, plan.c(target.string()), plan.c(root + dir.string())}, "symlink " + dir.string());
    } else if (fs::is_directory(st)) {
      plan.bind(dir.string(), root + dir.string(), true);
    }
  }
}

// Hidden paths inside a system directory: a read-only empty tmpfs over a directory, /dev/null
// over a file. One outside them is not in the task's root at all.
void plan_masks(Plan& plan, const std::string& root, const std::vector<fs::path>& hidden) {
  std::vector<fs::path> dirs;
  for (const auto& dir : system_dirs()) {
    std::error_code ec;
    dirs.push_back(fs::weakly_canonical(dir, ec));
  }
  for (const auto& path : hidden) {
    std::error_code ec;
    const auto target = fs::weakly_canonical(path, ec);
    if (ec || !fs::exists(target, ec)) continue;
    bool inside = false;
    for (const auto& dir : dirs) inside = inside || under(target, dir);
    if (!inside) continue;
    if (fs::is_directory(target, ec))
      plan.mount("tmpfs", root + target.string(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "mode=0,size=4k", "mask " + target.string());
    else
      plan.mount("/dev/null", root + target.string(), nullptr, MS_BIND, nullptr, "mask " + target.string());
  }
}

// A bind of the task's own directory or volume. A block volume's target is a device node, not a
// directory: the task gets a node of its own for it, in its /dev/mooring-volumes, made root's
// and the task's group's, 0660 or 0440 for a read-only claim, and bound where the volume's path
// is. The host's node (root:disk 0660) is neither bound in nor changed, as Kubernetes gives a
// pod's fsGroup its block volumes.
void plan_bind(Plan& plan, const Walls& w, std::size_t index, const BindSource& source) {
  const auto& b = w.binds[index];
  const std::string target = plan.root + b.path.string();
  if (source.kind == BindSource::Kind::device) {
    const std::string node = plan.root + kDeviceDir + "/" + std::to_string(index);
    const unsigned long mode = source.mode | (b.read_only ? 0440 : 0660);
    plan.add({OpKind::device, plan.c(node), nullptr, nullptr, mode, nullptr, source.rdev, w.gid},
             "make the device node of " + b.path.string());
    plan.bind(node, target, false, false);
    return;
  }
  plan.bind(b.path.string(), target, b.read_only, source.kind == BindSource::Kind::dir, source.tree);
}

bool is_system_top(const std::string& top) {
  for (const auto& dir : system_dirs())
    if (dir.string() == top) return true;
  return top == "/tmp" || top == "/dev" || top == "/proc";
}

}  // namespace

void Plan::add(Op op, std::string name) {
  ops.push_back(op);
  names.push_back(std::move(name));
}

// One mkdir per directory the plan has not made yet (the task's root starts empty): a deep
// volume path's parents are made once, not asked for again at each bind.
void Plan::mkdirs(const std::string& path) {
  for (std::size_t at = root.size() + 1; at <= path.size(); ++at) {
    if (at < path.size() && path[at] != '/') continue;
    std::string dir = path.substr(0, at);
    if (made.contains(dir)) continue;
    add({OpKind::mkdir, c(dir)}, "mkdir " + dir);
    made.insert(std::move(dir));
  }
}

void Plan::mount(const char* source, const std::string& target, const char* fstype, unsigned long flags,
                 const char* data, std::string name) {
  add({OpKind::mount, source, c(target), fstype, flags, data}, std::move(name));
  // What was made below the target is hidden by the new mount now.
  const std::string below = target + "/";
  for (auto it = made.lower_bound(below); it != made.end() && it->starts_with(below);) it = made.erase(it);
}

void Plan::bind(const std::string& source, const std::string& target, bool read_only, bool dir, int tree) {
  if (dir) {
    mkdirs(target);
  } else {
    mkdirs(fs::path(target).parent_path().string());
    add({OpKind::touch, c(target)}, "create " + target);
  }
  if (tree >= 0) {
    Op attach{OpKind::attach};
    attach.b = c(target);
    attach.tree = tree;
    add(attach, "bind " + source);
  } else {
    mount(c(source), target, nullptr, MS_BIND | MS_REC, nullptr, "bind " + source);
  }
  if (read_only)
    mount(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr,
          "make " + source + " read-only");
}

// Asked here, in the agent, while the plan is made: nothing but system calls runs after the clone.
std::vector<BindSource> bind_sources(const Walls& w) {
  std::vector<BindSource> out;
  for (const auto& b : w.binds) {
    BindSource s;
    struct stat st {};
    if (::stat(b.path.c_str(), &st) == 0) {
      if (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode))
        s = {BindSource::Kind::device, static_cast<mode_t>(st.st_mode & S_IFMT), st.st_rdev};
      else if (!S_ISDIR(st.st_mode))
        s.kind = BindSource::Kind::file;
    }
    out.push_back(s);
  }
  return out;
}

std::set<std::string> top_levels(const Walls& w) {
  std::set<std::string> tops;
  for (const auto& b : w.binds) {
    const auto rel = b.path.lexically_normal().relative_path();
    if (rel.empty()) continue;
    std::string top("/");  // appended: "/" + string trips GCC 12's false -Wrestrict at -O3
    top.append(rel.begin()->string());
    if (!is_system_top(top)) tops.insert(top);
  }
  return tops;
}

void plan_base(Plan& plan, const std::vector<fs::path>& hidden, const std::set<std::string>& tops) {
  plan_system_dirs(plan, plan.root);
  plan_masks(plan, plan.root, hidden);
  plan_dev(plan, plan.root);
  plan.mkdirs(plan.root + "/tmp");
  plan.mkdirs(plan.root + "/proc");
  for (const auto& top : tops) plan.mkdirs(plan.root + top);
}

Plan plan_root(const std::string& root, const std::vector<fs::path>& hidden, const std::set<std::string>& tops) {
  Plan plan(root);
  plan.mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr, "make the mounts its own (slave)");
  plan.mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m", "tmpfs on the task's root");
  plan_base(plan, hidden, tops);
  plan.mount(nullptr, root, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr,
             "make the task's root read-only");
  return plan;
}

// A private /tmp and /dev/shm; a tmpfs of its own on each top-level directory its binds need,
// read-only once they are made; its binds; /proc of its PID namespace.
void plan_task(Plan& plan, const Walls& w, const std::vector<BindSource>& sources) {
  const std::string& root = plan.root;
  const auto tops = top_levels(w);
  for (const char* dir : {"/tmp", "/proc", "/dev", "/dev/shm", kDeviceDir}) plan.made.insert(root + dir);
  for (const auto& top : tops) plan.made.insert(root + top);
  plan.mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", "tmpfs on /tmp");
  plan.mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", "tmpfs on /dev/shm");
  for (const auto& top : tops)
    plan.mount("tmpfs", root + top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m", "tmpfs on " + top);
  for (const auto& s : sources)
    if (s.kind == BindSource::Kind::device) {
      plan.mount("tmpfs", root + kDeviceDir, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k",
                 std::string("tmpfs on ") + kDeviceDir);
      break;
    }
  for (std::size_t i = 0; i < w.binds.size(); ++i) plan_bind(plan, w, i, sources[i]);
  plan.mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, "mount /proc");
  for (const auto& top : tops)
    plan.mount(nullptr, root + top, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr,
               "make " + top + " read-only");
}

// ---- in the child: system calls only, nothing allocated, no glibc locks ----

namespace {

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
    case OpKind::attach: return ::move_mount(op.tree, "", AT_FDCWD, op.b, MOVE_MOUNT_F_EMPTY_PATH);
  }
  return -1;
}

}  // namespace

int run_ops(const Op* ops, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (run_op(ops[i]) != 0) return static_cast<int>(i);
  return -1;
}

void child_exit(int code) {
  ::syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

long clone_sharing_memory(int (*fn)(void*), int flags, void* arg) {
  std::vector<char> stack(128 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const int pid = ::clone(fn, stack.data() + stack.size(), flags | CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
  const int e = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = e;
  return pid;
}

}  // namespace mooring::nodeagent::walls_plan
