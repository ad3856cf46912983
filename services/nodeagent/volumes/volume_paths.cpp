#include "services/nodeagent/volumes/volume_paths.hpp"

#include "shared/domain/ids.hpp"
#include "shared/domain/volume_capability.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mooring::nodeagent {

namespace fs = std::filesystem;

std::string volume_usage(bool read_only, domain::AttachmentMode attachment, domain::AccessMode access) {
  return domain::usage_dir_name(read_only, attachment, access);
}

namespace {

// The usage is ours ("rw-file-system-..."), but it is still a path component: same rules as ids.
domain::Status validate_usage(std::string_view usage) {
  if (usage.empty() || usage.size() > domain::kMaxIdLength || usage == "." || usage == "..") {
    return domain::error("invalid volume usage \"" + std::string(usage) + "\"");
  }
  for (char c : usage) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return domain::error("invalid volume usage \"" + std::string(usage) + "\"");
  }
  return {};
}

}  // namespace

VolumePaths::VolumePaths(fs::path root) : root_(std::move(root)) {}

domain::Expected<fs::path> VolumePaths::staging(std::string_view volume_id, std::string_view usage) const {
  if (auto s = domain::validate_volume_key(volume_id); !s) return domain::error(s.error());
  if (auto s = validate_usage(usage); !s) return domain::error(s.error());
  return root_ / "staging" / std::string(volume_id) / std::string(usage);
}

domain::Expected<fs::path> VolumePaths::publish(std::string_view alloc_id, std::string_view volume_id,
                                                std::string_view usage) const {
  if (auto s = domain::validate_allocation_id(alloc_id); !s) return domain::error(s.error());
  if (auto s = domain::validate_volume_key(volume_id); !s) return domain::error(s.error());
  if (auto s = validate_usage(usage); !s) return domain::error(s.error());
  return root_ / "per-alloc" / std::string(alloc_id) / std::string(volume_id) / std::string(usage);
}

domain::Status VolumePaths::ensure_dir(const fs::path& dir) const {
  // Mostly the parent is there already (the staging root, the allocation's directory): one mkdir.
  int rc = ::mkdir(dir.c_str(), 0700);
  if (rc != 0 && errno == ENOENT) {
    // A parent is missing: made the same way (0700), or above the root only made sure of.
    const auto parent = dir.parent_path();
    if (parent.native().size() < root_.native().size()) {
      std::error_code ec;
      fs::create_directories(parent, ec);
    } else if (auto s = ensure_dir(parent); !s) {
      return s;
    }
    rc = ::mkdir(dir.c_str(), 0700);
  }
  if (rc == 0) {
    ::chmod(dir.c_str(), 0700);  // mkdir applies the umask; 0700 is what we promise
    return {};
  }
  if (errno != EEXIST) return domain::error("cannot create directory " + dir.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return domain::error("cannot create directory " + dir.string() + ": exists and is not a directory");
  }
  return {};
}

void VolumePaths::remove_empty(const fs::path& dir) const {
  // rmdir(2) refuses non-empty directories and (EBUSY) mount points, which is exactly the guard
  // we want; stop at the first directory that stays.
  for (fs::path current = dir;
       current != root_ && current.native().starts_with(root_.native()) && current.has_relative_path();
       current = current.parent_path()) {
    if (::rmdir(current.c_str()) != 0 && errno != ENOENT) return;
  }
}

}  // namespace mooring::nodeagent
