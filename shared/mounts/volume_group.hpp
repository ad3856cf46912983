// A volume's files given a group, so that a task running as a user of that group (not root) can
// write them: the hostpath plugin for VOLUME_MOUNT_GROUP, the node agent as its fallback when a
// plugin lacks it (docs/security.md, "Volumes for a non-root user").
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace mooring::mounts {

struct GroupChange {
  bool walked = false;  // the tree was changed
  std::string error;    // names the path and the reason; empty on success
};

// Every file and directory under `root` (links left alone) gets the group `gid`, group read-write
// (and execute where the owner has it) and, for directories, the setgid bit so new files inherit
// the group. Unless `always`, nothing is walked when the root already has all three
// (Kubernetes' OnRootMismatch): a volume given its group once is not walked again.
GroupChange give_tree_to_group(const std::filesystem::path& root, gid_t gid, bool always);

}  // namespace mooring::mounts
