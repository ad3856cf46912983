#include "services/nodeagent/allocrunner/task_walls.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;

// Without walls a non-root task reaches its directory and volumes on the host's paths, under the
// agent's data dir, whose directories are root's 0700. The way to `target` is opened just enough,
// as Nomad opens its alloc dirs (0711): the levels all allocations share (the data dir, allocs/,
// mounts/, per-alloc/) traversable but not listable by anyone; from the allocation's own
// directory down, root's and the task's group's only (0710), so another allocation's user cannot
// pass. Nothing above the data dir is changed, and `target` itself is the task's or the volume's.
domain::Status open_way(const fs::path& data_dir, const fs::path& target, const std::string& alloc_id, gid_t gid) {
  const auto rel = target.lexically_relative(data_dir);
  if (rel.empty() || *rel.begin() == "..") return {};  // not below the data dir: not ours to open
  fs::path level = data_dir;
  bool own = false;
  auto open_level = [&]() -> domain::Status {
    own = own || level.filename() == alloc_id;
    struct stat st {};
    const bool ok = ::stat(level.c_str(), &st) == 0 &&
                    (own ? ::chown(level.c_str(), static_cast<uid_t>(-1), gid) == 0 && ::chmod(level.c_str(), 0710) == 0
                         : ::chmod(level.c_str(), (st.st_mode & 07700) | 0111) == 0);
    if (!ok)
      return domain::error("cannot open the way to " + target.string() + " at " + level.string() + ": " +
                           std::strerror(errno));
    return {};
  };
  if (auto s = open_level(); !s) return s;
  for (const auto& part : rel.parent_path()) {
    level /= part;
    if (auto s = open_level(); !s) return s;
  }
  return {};
}

}  // namespace

domain::Expected<ResolvedUser> resolve_task_user(const std::string& task_user, const domain::TaskUserRules& rules) {
  const std::string user = domain::effective_user(task_user, rules);
  const auto parsed = domain::parse_task_user(user);
  if (!parsed) return domain::error("task user: " + parsed.error());
  ResolvedUser out;
  if (parsed->uid && parsed->gid) {
    out = {*parsed->uid, *parsed->gid};
  } else {
    passwd pw{};
    passwd* found = nullptr;
    char buf[4096];
    const int rc = parsed->uid ? ::getpwuid_r(*parsed->uid, &pw, buf, sizeof buf, &found)
                               : ::getpwnam_r(parsed->name.c_str(), &pw, buf, sizeof buf, &found);
    if (!found && !parsed->uid)
      return domain::error("task user \"" + user + "\" is not a user on this node" +
                           (rc != 0 ? std::string(" (") + std::strerror(rc) + ")" : std::string()));
    out.uid = found ? pw.pw_uid : *parsed->uid;
    out.gid = found ? pw.pw_gid : static_cast<gid_t>(*parsed->uid);
  }
  // Checked again with the uid: a second name for uid 0 is root too.
  if (auto refused = domain::refused_user(task_user, rules, out.uid)) return domain::error(*refused);
  return out;
}

std::optional<uint32_t> volume_group_for(const domain::Allocation& alloc, const domain::TaskUserRules& rules) {
  if (!alloc.task || alloc.task->csi_plugin) return std::nullopt;
  const auto user = resolve_task_user(alloc.task->user, rules);
  if (!user || user->uid == 0) return std::nullopt;  // refused (the start says so), or root: no group needed
  return user->gid;
}

domain::Status wall_task(const domain::Allocation& alloc, const fs::path& alloc_dir,
                         const std::map<std::string, std::string>& volume_env, const TaskWallsOptions& options,
                         TaskSpec& spec) {
  const auto& task = *alloc.task;
  if (task.csi_plugin) return {};  // a plugin mounts for the node: root, the node's namespaces
  const auto user = resolve_task_user(task.user, options.rules);
  if (!user) return domain::error(user.error());
  Walls walls;
  walls.uid = user->uid;
  walls.gid = user->gid;
  walls.namespaces = options.namespaces;
  walls.root = alloc_dir / "root";
  walls.hidden = options.hidden;
  const auto local = alloc_dir / "local";
  std::error_code ec;
  fs::create_directories(walls.root, ec);
  fs::create_directories(local, ec);
  if (ec) return domain::error("cannot make the task's directory " + local.string() + ": " + ec.message());
  if (::chown(local.c_str(), user->uid, user->gid) != 0 || ::chmod(local.c_str(), 0700) != 0)
    return domain::error("cannot give the task its directory " + local.string() + ": " + std::strerror(errno));
  walls.binds.push_back({local, false});
  for (const auto& [name, request] : alloc.volumes) {
    const auto it = volume_env.find(domain::volume_env_var(name));
    if (it == volume_env.end()) continue;
    walls.binds.push_back({it->second, request.read_only});
  }
  if (!walls.namespaces && walls.uid != 0 && !options.data_dir.empty())
    for (const auto& bind : walls.binds)
      if (auto opened = open_way(options.data_dir, bind.path, alloc.id, walls.gid); !opened) return opened;
  spec.working_dir = local;
  if (!spec.env.contains("HOME")) spec.env["HOME"] = local.string();
  spec.walls = std::move(walls);
  spec.cgroup = alloc.id;
  spec.limits = {.cpu_millicores = task.resources.cpu, .memory_mb = task.resources.memory_mb};
  return {};
}

}  // namespace mooring::nodeagent
