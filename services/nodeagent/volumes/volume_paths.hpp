// The volumes room: mounting CSI volumes for allocations and releasing them durably.
// This file: where staging and publish targets live under the agent's mount root (Nomad's
// csimanager layout) and creating their directories 0700. Every id is validated first, so no id
// can name a path outside the root.
#pragma once

#include "shared/domain/modes.hpp"
#include "shared/domain/result.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace mooring::nodeagent {

// "rw-file-system-single-node-writer": one directory per way of using a volume.
std::string volume_usage(bool read_only, domain::AttachmentMode attachment, domain::AccessMode access);

class VolumePaths {
 public:
  explicit VolumePaths(std::filesystem::path root);

  const std::filesystem::path& root() const { return root_; }

  // {root}/staging/{volume}/{usage}
  domain::Expected<std::filesystem::path> staging(std::string_view volume_id, std::string_view usage) const;
  // {root}/per-alloc/{alloc}/{volume}/{usage}
  domain::Expected<std::filesystem::path> publish(std::string_view alloc_id, std::string_view volume_id,
                                                  std::string_view usage) const;

  // Creates `dir` and any missing parents below the root with mode 0700 (the CO owns staging
  // directories and the parents of publish targets; the plugin creates the target itself).
  domain::Status ensure_dir(const std::filesystem::path& dir) const;

  // Removes `dir` and then its parents up to (not including) the root, each only while empty and
  // not a mount point: never a recursive delete, which could reach through a live mount.
  void remove_empty(const std::filesystem::path& dir) const;

 private:
  std::filesystem::path root_;
};

}  // namespace mooring::nodeagent
