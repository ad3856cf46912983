// Claims room: the operation id of a controller call, which the node agent uses to run one
// logical call once (proto/mooring/v1/nodeagent.proto, `operation_id`). Pure: derived only from
// committed state, so every leader computes the same id for the same call — the new leader's
// resend of a call the old one sent is recognised as a repeat — and a new claim (a new
// create_time) gets a new id.
#pragma once

#include <string>

#include "shared/domain/claim.hpp"

namespace mooring::controlplane {

// The ControllerPublishVolume of `claim` (the allocation's claim on the volume `volume_key`):
// one per claim; a claim's intent is recorded once, and its retries (pending after a crash or
// an uncertain answer) are the same logical call.
std::string publish_operation_id(const std::string& volume_key, const std::string& allocation_id,
                                 const domain::Claim& claim);
// The ControllerUnpublishVolume that releases `claim`: one per claim (the release runs once,
// from node-detached to controller-detached), distinct from its publish.
std::string unpublish_operation_id(const std::string& volume_key, const std::string& allocation_id,
                                   const domain::Claim& claim);

}  // namespace mooring::controlplane
