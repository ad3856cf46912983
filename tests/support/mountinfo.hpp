// Test support: the kernel's mount table (/proc/self/mountinfo) as data, so tests can assert
// that a path really is (or is no longer) a mount point, and find what is still mounted below a
// temp dir to clean it up.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mooring::test {

struct MountInfo {
  int mount_id = 0;
  int parent_id = 0;
  std::string root;         // path inside the source filesystem ("/" or a bind's subdirectory)
  std::string mount_point;  // absolute, unescaped
  std::string options;      // per-mount options ("rw,relatime" / "ro,...")
  std::string fs_type;
  std::string source;
  bool read_only() const;
};

std::vector<MountInfo> read_mountinfo();
std::vector<MountInfo> parse_mountinfo(std::string_view text);

// `path` made absolute and symlink-free, as mountinfo spells it.
std::string canonical_path(const std::filesystem::path& path);

// True when `path` itself is a mount point.
bool is_mounted(const std::filesystem::path& path);
// The topmost mount at `path` (the last one stacked), if any.
std::optional<MountInfo> find_mount(const std::filesystem::path& path);
// Mounts at or below `prefix`, deepest (and most recently stacked) first: the unmount order.
std::vector<MountInfo> mounts_under(const std::filesystem::path& prefix);

// Unmounts everything at or below `prefix` (MNT_DETACH when busy). True when nothing is left.
bool unmount_all_under(const std::filesystem::path& prefix);

}  // namespace mooring::test
