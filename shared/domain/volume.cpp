// Volume rules that need no state: mount option merge and claim counts.
#include "shared/domain/volume.hpp"

#include <algorithm>

namespace mooring::domain {

MountOptions merge_mount_options(const MountOptions& volume, const MountOptions& request) {
  MountOptions out = volume;
  if (!request.fs_type.empty()) out.fs_type = request.fs_type;
  if (!request.mount_flags.empty()) out.mount_flags = request.mount_flags;
  if (request.group_change_policy != GroupChangePolicy::unset) out.group_change_policy = request.group_change_policy;
  return out;
}

namespace {
int count_taken(const Volume& v, ClaimMode mode) {
  return static_cast<int>(std::count_if(v.claims.begin(), v.claims.end(), [&](const auto& entry) {
    return entry.second.state == ClaimState::taken && entry.second.mode == mode;
  }));
}
}  // namespace

int current_readers(const Volume& v) { return count_taken(v, ClaimMode::read); }
int current_writers(const Volume& v) { return count_taken(v, ClaimMode::write); }

bool has_capability(const Volume& v, AccessMode access, AttachmentMode attachment) {
  return std::find(v.requested_capabilities.begin(), v.requested_capabilities.end(),
                   VolumeCapability{access, attachment}) != v.requested_capabilities.end();
}

}  // namespace mooring::domain
