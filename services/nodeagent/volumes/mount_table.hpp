// What the kernel says is mounted: the manager checks it before skipping a stage ("already
// staged?"), when restoring after a restart ("still mounted?") and when a plugin answers
// NOT_FOUND on an unmount. An interface so unit tests with a fake plugin can fake the table too.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::nodeagent {

class MountTable {
 public:
  virtual ~MountTable() = default;
  // True when `path` itself is a mount point.
  virtual bool is_mounted(const std::filesystem::path& path) const = 0;
};

// /proc/self/mountinfo. The agent runs in the host's mount namespace (bidirectional propagation),
// so what plugins mount is visible here.
class ProcMountTable final : public MountTable {
 public:
  explicit ProcMountTable(std::filesystem::path mountinfo = "/proc/self/mountinfo");
  bool is_mounted(const std::filesystem::path& path) const override;

 private:
  std::filesystem::path mountinfo_;
};

// The mount points (field 5) of a mountinfo text, with octal escapes (\040 etc.) decoded.
std::vector<std::string> parse_mount_points(std::string_view mountinfo);

}  // namespace mooring::nodeagent
