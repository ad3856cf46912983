// Claims room: what a ControllerPublishVolume outcome does to the claim that asked for it. Pure:
// the claim path calls the controller and commits; these rules decide. A publish that failed for
// certain frees the claim; one that may have happened leaves it for release, so
// ControllerUnpublish always follows an uncertain publish.
#pragma once

#include <map>
#include <string>

#include "shared/csi/error_table.hpp"
#include "shared/domain/time.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane {

// Set as the LastError of a taken claim between recording its intent and storing the publish
// context, so a re-claim after a crash (or a cancelled call) publishes again instead of
// answering without a publish context. A taken claim with this marker may or may not be
// published; its release always issues ControllerUnpublish.
inline constexpr const char* kPublishPending = "waiting for ControllerPublishVolume to be confirmed";

// The claim's intent was recorded and its publish is not confirmed yet.
bool publish_pending(const domain::Claim& claim);

// The other half of the rule the release follows for a pending publish (gc/release_rules.cpp):
// a claim of the volume on `node_id`, other than `allocation_id`'s, being released, that a new
// ControllerPublish to the node must not overtake. Either its ControllerUnpublish to the node
// is its next step (node-detached: the GC may be sending it now, and a publish answered before
// it lands is undone by it, or refused beside it), or its publication has the other readonly
// flag (`read_only` is the new claim's), which the plugin keeps until that claim is detached
// and refuses a publish beside (ALREADY_EXISTS: the claim dropped, claimed and published again).
// Null when there is none: the new claim may publish.
const domain::Claim* release_ahead_on_node(const domain::Volume& volume, const std::string& node_id,
                                           const std::string& allocation_id, bool read_only);

struct PublishFailure {
  csi::Outcome outcome;  // the error table's reading of the code
  // Nothing can have been published: the claim is freed. Otherwise it is released with
  // ControllerUnpublish (unless kept).
  bool certain;
  // The controller refused the first attempt for good: the caller passes its code on.
  bool rejected;
  // Nothing happened this time and the claim keeps waiting for its publish (state and pending
  // marker unchanged, nothing written): the agent retries the claim, which sends the same
  // logical call again (the same operation id).
  bool kept = false;
};

// `sent`: a controller received the call (PublishResult::sent). `retry_of_pending`: the claim
// was already waiting for a publish, so an earlier attempt may have published even when this
// one failed for good. `unheard`: no controller's agent was reached (none to ask, or none could
// be connected to) while a node running a controller instance of the plugin is not marked down:
// its agent may be restarting, maybe at another address, its plugin not healthy again yet.
PublishFailure classify_publish_failure(grpc::StatusCode code, bool sent, bool retry_of_pending, bool unheard = false);

// Stores the publish context on the allocation's claim and clears the pending marker.
void record_publish(domain::Volume& volume, const std::string& allocation_id,
                    std::map<std::string, std::string> publish_context, domain::Time now);

// Frees the claim (certain) or moves it to unpublishing with `error` as its LastError.
void record_publish_failure(domain::Volume& volume, const std::string& allocation_id, const PublishFailure& failure,
                            std::string error, domain::Time now);

}  // namespace mooring::controlplane
