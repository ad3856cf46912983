// How the runner puts an allocation's task behind its walls (issue 41): the user it runs as
// (the node's rules, the name resolved to a uid and gid here, checked again against the rules),
// its own directory, its volumes (bound in; the group a non-root task needs to write them is
// given where they are mounted: VolumeOperations::mount), what stays hidden, its cgroup and limits. CSI plugin tasks get none of this: they mount for the
// node as root in its namespaces, and submitting one needs a cluster right (issue 40).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "services/nodeagent/allocrunner/task_process.hpp"
#include "shared/domain/allocation.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/task_user.hpp"

namespace mooring::nodeagent {

struct TaskWallsOptions {
  domain::TaskUserRules rules;
  bool namespaces = true;  // the agent's task_isolation
  // The agent's data dir, TLS files and config file: never visible to a task.
  std::vector<std::filesystem::path> hidden;
  // The agent's data dir. Without namespaces, the way from it to a non-root task's directory and
  // volumes is opened for the task's group (task_walls.cpp, open_way).
  std::filesystem::path data_dir;
};

struct ResolvedUser {
  uid_t uid = 0;
  gid_t gid = 0;
};
// Task.User (or the node's default) as a uid and gid: a name through the user database, "uid"
// with that user's group (or the same number), "uid:gid" as given. Refused users are errors.
domain::Expected<ResolvedUser> resolve_task_user(const std::string& task_user, const domain::TaskUserRules& rules);

// Fills spec.walls, cgroup and limits for `alloc`'s task; `alloc_dir` is its directory in the
// agent's state, `volume_env` the MOORING_VOLUME_* paths. Makes the task's own directory
// (<alloc_dir>/local, its working directory and HOME).
domain::Status wall_task(const domain::Allocation& alloc, const std::filesystem::path& alloc_dir,
                         const std::map<std::string, std::string>& volume_env, const TaskWallsOptions& options,
                         TaskSpec& spec);

// The group the allocation's volumes are mounted for (VOLUME_MOUNT_GROUP, or the agent's
// GroupChangePolicy): the task user's, when it is not root; none for a plugin task, a root task,
// or a user this node refuses (its start fails saying why).
std::optional<uint32_t> volume_group_for(const domain::Allocation& alloc, const domain::TaskUserRules& rules);

}  // namespace mooring::nodeagent
