// mooring-hostpath: the bind-mount primitives NodeStage/NodePublish use, and the path form
// mounts are recorded under. mount(2)/umount2(2) directly, no mount(8) binary.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "shared/mounts/mount_point.hpp"

namespace mooring::hostpath {

// The path form mounts are recorded under, and whether a path is a mount point: shared/mounts.
using mounts::canonical_mount_path;
using mounts::is_mount_point;

// Bind-mounts `source` onto `target`; with read_only, remounts the bind read-only
// (MS_REMOUNT|MS_BIND|MS_RDONLY), the only way a bind becomes read-only. On a failed remount the
// bind is undone so no writable mount is left behind.
std::error_code bind_mount(const std::filesystem::path& source, const std::filesystem::path& target, bool read_only);

// Unmounts everything stacked on `path` (a crash may have mounted twice). EBUSY is retried
// briefly; MNT_DETACH is the last resort. OK when nothing is mounted there.
std::error_code unmount_all(const std::filesystem::path& path);

// Tries a bind mount inside `scratch_dir`; returns a human-readable reason when mounting is not
// possible (not root, no CAP_SYS_ADMIN, read-only /proc ...), or an empty string.
std::string check_mount_privilege(const std::filesystem::path& scratch_dir);

}  // namespace mooring::hostpath
