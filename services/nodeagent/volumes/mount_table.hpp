// What the kernel says is mounted: the manager checks it before skipping a stage ("already
// staged?"), when restoring after a restart ("still mounted?") and when a plugin answers
// NOT_FOUND on an unmount. An interface so unit tests with a fake plugin can fake the table too.
#pragma once

#include <filesystem>

namespace mooring::nodeagent {

class MountTable {
 public:
  virtual ~MountTable() = default;
  // True when `path` itself is a mount point.
  virtual bool is_mounted(const std::filesystem::path& path) const = 0;
};

// The kernel's mount table (shared/mounts). The agent runs in the host's mount namespace
// (bidirectional propagation), so what plugins mount is visible here.
class ProcMountTable final : public MountTable {
 public:
  bool is_mounted(const std::filesystem::path& path) const override;
};

}  // namespace mooring::nodeagent
