#include "services/nodeagent/process/walls_template.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <optional>

#include "services/nodeagent/process/walls_plan.hpp"

namespace mooring::nodeagent {
namespace {

using namespace walls_plan;

// What `path` is now: a file replaced by a rename, or one that appeared, is another.
std::string stamp(const std::filesystem::path& path, bool follow) {
  struct stat st {};
  if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) return "-";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_mode & S_IFMT);
}

WallsTemplateKey key_for(const Walls& w) {
  WallsTemplateKey key;
  for (const auto& path : w.hidden) {
    key.hidden.push_back(path.string());
    key.stamps.push_back(stamp(path, true));
  }
  for (const auto& dir : system_dirs()) key.stamps.push_back(stamp(dir, false));
  key.tops = top_levels(w);
  return key;
}

bool serves(const WallsTemplateKey& have, const WallsTemplateKey& want) {
  return have.hidden == want.hidden && have.stamps == want.stamps &&
         std::includes(have.tops.begin(), have.tops.end(), want.tops.begin(), want.tops.end());
}

// ---- in the builder: system calls only. It shares the agent's memory and descriptor table
// (CLONE_FILES: the namespace's descriptor it opens is the agent's) in a mount namespace of its
// own, which becomes the template once it has pivoted into the root it built. ----

constexpr int kOpenNamespace = -1, kPivot = -2;

struct BuilderArgs {
  const Op* ops = nullptr;
  std::size_t count = 0;
  const char* root = nullptr;
  int ns_fd = -1;  // out
  int failed = 0;  // out: an op's index, a step above, or kNone
  int error = 0;   // out: its errno
};
constexpr int kNone = -100;

int builder_failed(BuilderArgs& a, int step) {
  a.failed = step;
  a.error = errno;
  return 1;
}

// Returns rather than exits (clone's return is the builder's exit): ASan warns at every noreturn
// call on a stack it does not know.
int build(void* p) {
  auto& a = *static_cast<BuilderArgs*>(p);
  if (const int i = run_ops(a.ops, a.count); i >= 0) return builder_failed(a, i);
  a.ns_fd = ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);  // while the host's /proc is there
  if (a.ns_fd < 0) return builder_failed(a, kOpenNamespace);
  if (::chdir(a.root) != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0 || ::umount2(".", MNT_DETACH) != 0 ||
      ::chdir("/") != 0)
    return builder_failed(a, kPivot);
  return 0;
}

std::variant<std::shared_ptr<const WallsTemplate>, WallError> make(const Walls& w, WallsTemplateKey key) {
  std::string root = w.root.string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  Plan plan = plan_root(root, w.hidden, key.tops);
  BuilderArgs a;
  a.ops = plan.ops.data();
  a.count = plan.ops.size();
  a.root = root.c_str();
  a.failed = kNone;
  const long pid = clone_sharing_memory(build, CLONE_NEWNS | CLONE_FILES, &a);
  if (pid < 0) return WallError{"start the walls' template builder", errno};
  int st = 0;
  while (::waitpid(static_cast<pid_t>(pid), &st, 0) < 0 && errno == EINTR) {
  }
  UniqueFd ns{a.ns_fd};
  if (a.failed != kNone) {
    const std::string step = a.failed == kOpenNamespace ? "open its mount namespace"
                             : a.failed == kPivot       ? "pivot_root into it"
                                                        : plan.names[static_cast<std::size_t>(a.failed)];
    return WallError{"make the walls' template: " + step, a.error};
  }
  auto made = std::make_shared<WallsTemplate>();
  made->ns = std::move(ns);
  made->key = std::move(key);
  return made;
}

// open_tree without OPEN_TREE_CLONE only opens a path: ENOSYS before Linux 5.2 (move_mount came
// with it), EPERM where a seccomp profile refuses the new mount API.
bool kernel_has_open_tree() {
  UniqueFd probe{::open_tree(AT_FDCWD, "/", OPEN_TREE_CLOEXEC)};
  return probe.fd >= 0 || (errno != ENOSYS && errno != EPERM);
}

struct Cache {
  std::mutex mu;
  std::shared_ptr<const WallsTemplate> current;
  std::optional<bool> supported;
};

}  // namespace

std::variant<std::shared_ptr<const WallsTemplate>, NoTemplate, WallError> walls_template(const Walls& w) {
  static Cache cache;
  auto key = key_for(w);
  std::lock_guard lock(cache.mu);
  if (!cache.supported) cache.supported = kernel_has_open_tree();
  if (!*cache.supported) return NoTemplate{};
  if (cache.current && serves(cache.current->key, key)) return cache.current;
  // The mount points the last one had stay: tasks of one agent need the same few.
  if (cache.current && cache.current->key.hidden == key.hidden)
    key.tops.insert(cache.current->key.tops.begin(), cache.current->key.tops.end());
  auto made = make(w, std::move(key));
  if (auto* err = std::get_if<WallError>(&made)) return *err;
  cache.current = std::get<std::shared_ptr<const WallsTemplate>>(std::move(made));
  return cache.current;
}

}  // namespace mooring::nodeagent
