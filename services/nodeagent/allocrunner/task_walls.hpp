// How the runner puts an allocation's task behind its walls (issue 41): the user it runs as
// (the node's rules, the name resolved to a uid and gid here, checked again against the rules),
// its own directory, its volumes (the group ownership a non-root task needs to write them), what
// stays hidden, its cgroup and limits. CSI plugin tasks get none of this: they mount for the
// node as root in its namespaces, and submitting one needs a cluster right (issue 40).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
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
// (<alloc_dir>/local, its working directory and HOME) and gives its writable volumes its group.
domain::Status wall_task(const domain::Allocation& alloc, const std::filesystem::path& alloc_dir,
                         const std::map<std::string, std::string>& volume_env, const TaskWallsOptions& options,
                         TaskSpec& spec);

// OnRootMismatch (Kubernetes' fsGroupChangePolicy): when the volume's root is not yet the
// group's, the whole tree gets the group, group rw and setgid directories, once; a volume whose
// root already has the group (from an earlier mount, or a plugin that honoured
// VOLUME_MOUNT_GROUP) is not walked again. Returns whether it walked.
domain::Expected<bool> give_volume_to_group(const std::filesystem::path& root, gid_t gid);

}  // namespace mooring::nodeagent
