// mooring-hostpath: the kernel's view of mounts (/proc/self/mountinfo) and the bind-mount
// primitives NodeStage/NodePublish use. mount(2)/umount2(2) directly, no mount(8) binary.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace mooring::hostpath {

struct MountEntry {
  int mount_id = 0;
  int parent_id = 0;
  std::string root;         // path inside the source filesystem (a bind mount shows its subdirectory)
  std::string mount_point;  // unescaped
  std::string options;      // per-mount options, e.g. "ro,relatime"
  std::string fs_type;
  std::string source;
  bool read_only() const;
};

std::vector<MountEntry> read_mount_table();
// Parses mountinfo text (exposed for tests).
std::vector<MountEntry> parse_mount_table(std::string_view text);

// The absolute, symlink-resolved form of `path` as it would appear in mountinfo.
std::string canonical_mount_path(const std::filesystem::path& path);

// True when `path` is itself a mount point (not merely inside one).
bool is_mount_point(const std::filesystem::path& path);

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
