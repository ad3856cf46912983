// csi.v1 VolumeCapability construction.
#include "shared/wire/volume_capability.hpp"

#include "shared/wire/proto_convert.hpp"

namespace mooring::domain {

Expected<::csi::v1::VolumeCapability> csi_volume_capability(AccessMode access, AttachmentMode attachment,
                                                            const MountOptions& mount_options) {
  if (access == AccessMode::unknown) return error("volume capability: access mode is not set");
  ::csi::v1::VolumeCapability cap;
  cap.mutable_access_mode()->set_mode(to_csi(access));
  switch (attachment) {
    case AttachmentMode::file_system: {
      auto* mount = cap.mutable_mount();
      mount->set_fs_type(mount_options.fs_type);
      for (const auto& flag : mount_options.mount_flags) mount->add_mount_flags(flag);
      break;
    }
    case AttachmentMode::block_device: cap.mutable_block(); break;
    case AttachmentMode::unknown: return error("volume capability: attachment mode is not set");
  }
  return cap;
}

}  // namespace mooring::domain
