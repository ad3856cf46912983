// Is a path a mount point? The node agent asks before skipping a stage, when restoring after a
// restart and when a plugin answers NOT_FOUND on an unmount; the hostpath plugin asks on every
// NodeStage/NodePublish/NodeUnpublish/NodeUnstage.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::mounts {

// True when `path` (symlinks followed) is itself the root of a mount, not merely inside one.
// One statx(2) with STATX_ATTR_MOUNT_ROOT (Linux 5.8+), whatever the number of mounts on the
// node; AT_STATX_DONT_SYNC, so a network filesystem answers from its cache instead of asking its
// server. Kernels that do not report the attribute get a scan of /proc/self/mountinfo.
bool is_mount_point(const std::filesystem::path& path);

// `path` absolute, symlink-free and without a trailing slash: as mountinfo spells a mount point.
std::string canonical_mount_path(const std::filesystem::path& path);

// The same answer from /proc/self/mountinfo alone (the fallback; exposed for tests).
bool is_mount_point_in_mountinfo(const std::filesystem::path& path);

// The mount points (field 5) of a mountinfo text, with octal escapes (\040 etc.) decoded.
std::vector<std::string> parse_mount_points(std::string_view mountinfo);

}  // namespace mooring::mounts
