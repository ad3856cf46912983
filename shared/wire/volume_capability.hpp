// Wire: the csi.v1 VolumeCapability both services send for a volume's (access mode, attachment
// mode, mount options). In namespace domain, like the other conversions, so callers read the same.
#pragma once

#include "csi/v1/csi.pb.h"
#include "shared/domain/modes.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::domain {

// file-system -> mount{fs_type, mount_flags}; block-device -> block (mount options ignored).
// Unknown modes are an error naming the mode.
Expected<::csi::v1::VolumeCapability> csi_volume_capability(AccessMode access, AttachmentMode attachment,
                                                            const MountOptions& mount_options);

}  // namespace mooring::domain
