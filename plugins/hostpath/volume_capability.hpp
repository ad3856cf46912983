// mooring-hostpath: which CSI volume capabilities a hostpath volume (a directory, or a block
// device) supports, and what an access mode implies (single node? read-only?). Pure functions.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/support/status.h>

#include "csi/v1/csi.pb.h"

namespace mooring::hostpath {

// Why no hostpath volume can serve the capability (it is malformed: no access type, no or an
// unknown access mode); empty when it is well formed. ValidateVolumeCapabilities reports it in
// its message, everything else answers INVALID_ARGUMENT.
std::string unsupported_reason(const csi::v1::VolumeCapability& cap);

// Why the capability does not fit the volume's kind (block access to a directory volume, mount
// access to a block volume); empty when it fits. The spec's "exceeds capabilities".
std::string access_type_mismatch(const csi::v1::VolumeCapability& cap, const std::string& volume_id, bool block_volume);

// OK, or INVALID_ARGUMENT naming `field` ("volume_capability", "volume_capabilities[2]") when the
// capability is malformed.
grpc::Status check_capability(const csi::v1::VolumeCapability& cap, std::string_view field);

bool is_single_node_mode(int mode);
bool is_reader_only_mode(int mode);
// The mount must be read-only: reader-only mode, the request's readonly flag, or an "ro" mount flag.
bool wants_read_only(const csi::v1::VolumeCapability& cap, bool readonly_flag);

}  // namespace mooring::hostpath
