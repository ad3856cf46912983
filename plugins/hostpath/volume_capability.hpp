// mooring-hostpath: which CSI volume capabilities a directory-backed volume supports, and what
// an access mode implies (single node? read-only?). Pure functions.
#pragma once

#include <string_view>

#include <grpcpp/support/status.h>

#include "csi/v1/csi.pb.h"

namespace mooring::hostpath {

// Why the capability is malformed (no access type, no or an unknown access mode); empty when it
// is well formed. A malformed capability is INVALID_ARGUMENT everywhere.
std::string malformed_reason(const csi::v1::VolumeCapability& cap);

// Why the capability cannot be served (malformed, or block access: directories only); empty when
// supported. ValidateVolumeCapabilities reports it in its message, not as an error.
std::string unsupported_reason(const csi::v1::VolumeCapability& cap);

// OK, or INVALID_ARGUMENT naming `field` ("volume_capability", "volume_capabilities[2]") when the
// capability is malformed or unsupported: what CreateVolume, ControllerPublishVolume and both
// expansions answer (for the expansions the spec's "exceeds capabilities" is INVALID_ARGUMENT).
grpc::Status check_capability(const csi::v1::VolumeCapability& cap, std::string_view field);

// NodeStageVolume and NodePublishVolume: a malformed capability is INVALID_ARGUMENT, one the
// volume does not support is FAILED_PRECONDITION (the spec's "exceeds capabilities" row for them).
grpc::Status check_node_capability(const csi::v1::VolumeCapability& cap, std::string_view field);

bool is_single_node_mode(int mode);
bool is_reader_only_mode(int mode);
// The mount must be read-only: reader-only mode, the request's readonly flag, or an "ro" mount flag.
bool wants_read_only(const csi::v1::VolumeCapability& cap, bool readonly_flag);

}  // namespace mooring::hostpath
