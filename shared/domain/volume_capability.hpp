// Domain: the "usage" name of node-side directories, one per way of using a volume. The csi.v1
// VolumeCapability for a volume is wire code: shared/wire/volume_capability.hpp.
#pragma once

#include "shared/domain/modes.hpp"

#include <string>

namespace mooring::domain {

// "rw-file-system-single-node-writer" / "ro-block-device-multi-node-reader-only": the directory
// name under staging/ and per-alloc/ (Nomad's UsageOptions.ToFS), unique per way of using a volume.
std::string usage_dir_name(bool read_only, AttachmentMode attachment, AccessMode access);

}  // namespace mooring::domain
