// mooring-hostpath: which CSI volume capabilities a directory-backed volume supports, and what
// an access mode implies (single node? read-only?). Pure functions.
#pragma once

#include <string_view>

#include <grpcpp/support/status.h>

#include "csi/v1/csi.pb.h"

namespace mooring::hostpath {

// OK, or INVALID_ARGUMENT naming `field` ("volume_capability", "volume_capabilities[2]") when the
// capability is missing its access type or mode, or asks for block access (directories only).
grpc::Status check_capability(const csi::v1::VolumeCapability& cap, std::string_view field);

// Same check, but returns the reason instead of a status (ValidateVolumeCapabilities reports
// unsupported capabilities in its message, not as an error). Empty when supported.
std::string unsupported_reason(const csi::v1::VolumeCapability& cap);

bool is_single_node_mode(int mode);
bool is_reader_only_mode(int mode);
// The mount must be read-only: reader-only mode, the request's readonly flag, or an "ro" mount flag.
bool wants_read_only(const csi::v1::VolumeCapability& cap, bool readonly_flag);

}  // namespace mooring::hostpath
