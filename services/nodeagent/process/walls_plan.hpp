// The mount plan of a walled task's root (issue 41), private to the process room. It is made in
// the agent, where it may allocate, and run by a child that shares the agent's memory (walls.cpp's
// start, walls_template.cpp's builder), which only reads it and makes system calls. Two parts:
// the base (the host's system directories read-only, the hidden paths masked, /dev's nodes) does
// not depend on the task and is made once into the template (walls_template.hpp); the task's part
// (a private /tmp and /dev/shm, its own directory and volumes, /proc of its PID namespace) is
// made at each start in the task's copy of it.
#pragma once

#include <sys/types.h>

#include <deque>
#include <set>
#include <string>
#include <vector>

#include "services/nodeagent/process/walls.hpp"

namespace mooring::nodeagent::walls_plan {

enum class OpKind { mkdir, touch, mount, symlink, device, attach };
struct Op {
  OpKind kind;
  const char* a = nullptr;  // mount: source; symlink: target; else the path
  const char* b = nullptr;  // mount, attach: target; symlink: the link
  const char* fstype = nullptr;
  unsigned long flags = 0;  // mount: its flags; device: the node's type and mode
  const char* data = nullptr;
  dev_t dev = 0;  // device: the node's device number, made root's and `gid`'s
  gid_t gid = 0;
  int tree = -1;  // attach: a detached copy of a host path's mounts (open_tree), moved to `b`
};

// Where each of the task's binds comes from (stat'ed once, in the agent).
struct BindSource {
  enum class Kind { dir, file, device } kind = Kind::dir;
  mode_t mode = 0;  // device: S_IFBLK or S_IFCHR
  dev_t rdev = 0;
  int tree = -1;  // the template's start: its open_tree copy; -1: bound by path (mount(2))
};
std::vector<BindSource> bind_sources(const Walls& w);

struct Plan {
  explicit Plan(std::string r = {}) : root(std::move(r)) {}
  std::string root;                 // exists; directories are made below it ("": the task's /)
  std::set<std::string> made;       // directories made so far and not hidden by a mount since
  std::deque<std::string> strings;  // a deque: c_str()s stay put
  std::vector<Op> ops;
  std::vector<std::string> names;
  const char* c(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }
  void add(Op op, std::string name);
  void mkdirs(const std::string& path);
  void mount(const char* source, const std::string& target, const char* fstype, unsigned long flags, const char* data,
             std::string name);
  void bind(const std::string& source, const std::string& target, bool read_only, bool dir = true, int tree = -1);
};

// The top-level directories the task's binds need outside the system directories and /tmp (the
// agent's data dir's, usually "/var"): each is a mount point in the base and a small read-only
// tmpfs of the task's own, where the paths to its binds are made.
std::set<std::string> top_levels(const Walls& w);

// The base below plan.root, which is already a tmpfs: the system directories, the masks, /dev
// (read-only), and the mount points of /tmp, /proc and `tops`.
void plan_base(Plan& plan, const std::vector<std::filesystem::path>& hidden, const std::set<std::string>& tops);

// A root at `root` (an existing directory) holding the base: the mounts made slave first, so
// nothing propagates back to the host, then a tmpfs, the base, and the tmpfs made read-only.
// The template's builder pivots into it; a start without a template builds it at each start.
Plan plan_root(const std::string& root, const std::vector<std::filesystem::path>& hidden,
               const std::set<std::string>& tops);

// The task's part below plan.root, which holds the base.
void plan_task(Plan& plan, const Walls& w, const std::vector<BindSource>& sources);

// ---- in the child: system calls only ----

// Runs ops[0..count); the index of the op that failed (errno says why), or -1.
int run_ops(const Op* ops, std::size_t count);

[[noreturn]] void child_exit(int code);

// Starts fn(arg) in a child sharing the agent's memory until it execs or exits (then this
// returns), every signal blocked meanwhile, as posix_spawn does: none of the agent's handlers may
// run in the child. `flags`: namespaces and CLONE_FILES, added to CLONE_VM | CLONE_VFORK.
long clone_sharing_memory(int (*fn)(void*), int flags, void* arg);

}  // namespace mooring::nodeagent::walls_plan
