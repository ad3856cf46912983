// Domain: the pure rules both services apply when talking CSI about a volume: the csi.v1
// VolumeCapability for (access mode, attachment mode, mount options) and the "usage" name of
// node-side directories.
#pragma once

#include "csi/v1/csi.pb.h"
#include "shared/domain/modes.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/volume.hpp"

#include <string>

namespace mooring::domain {

// file-system -> mount{fs_type, mount_flags}; block-device -> block (mount options ignored).
// Unknown modes are an error naming the mode.
Expected<::csi::v1::VolumeCapability> csi_volume_capability(AccessMode access, AttachmentMode attachment,
                                                            const MountOptions& mount_options);

// "rw-file-system-single-node-writer" / "ro-block-device-multi-node-reader-only": the directory
// name under staging/ and per-alloc/ (Nomad's UsageOptions.ToFS), unique per way of using a volume.
std::string usage_dir_name(bool read_only, AttachmentMode attachment, AccessMode access);

}  // namespace mooring::domain
