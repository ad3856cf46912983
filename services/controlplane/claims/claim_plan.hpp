// Claims room: the decision before a claim is recorded — is the claim allowed, does it change
// anything, and must ControllerPublish follow. Pure: the caller looks the objects up, commits
// the planned volume and then calls the controller.
#pragma once

#include <functional>
#include <string>

#include "services/controlplane/claims/claim_rules.hpp"
#include "shared/domain/allocation.hpp"
#include "shared/domain/node.hpp"

namespace mooring::controlplane {

// A claim as an agent asks for it, in domain values.
struct ClaimInput {
  std::string volume_key;  // domain::volume_key: the agent service resolves it in the allocation's namespace
  std::string allocation_id;
  std::string node_id;
  domain::ClaimMode mode = domain::ClaimMode::read;
  domain::AccessMode access_mode = domain::AccessMode::unknown;
  domain::AttachmentMode attachment_mode = domain::AttachmentMode::unknown;
};

struct ClaimPlan {
  domain::Volume volume;  // with the claim recorded (and marked publish-pending when `publish`)
  ClaimOutcome outcome = ClaimOutcome::unchanged;
  // False for an idempotent re-claim: answer with the stored claim, write nothing.
  bool record = true;
  bool publish = false;           // ControllerPublish follows the durable intent
  bool retry_of_pending = false;  // the claim was already waiting for a publish
  bool read_only = false;         // how the node mounts it
};

// "claim of volume "v" by allocation "a"": the subject of every claim error.
std::string claim_subject(const ClaimInput& input);

// `node`, `volume`, `alloc` and `plugin` are the stored objects the input names (null when
// absent). `can_publish`: a controller route is configured.
Ruled<ClaimPlan> plan_claim(const ClaimInput& input, const domain::Node* node, const domain::Volume* volume,
                            const domain::Allocation* alloc, const domain::Plugin* plugin, bool can_publish,
                            domain::Time now);

// A claim refused for a conflict only with claims being released (past taken, or held by
// allocations `leaving` names): it is granted once they are freed. Such a claim waits for those
// releases (the handoff of a volume from a stopped allocation to its replacement) instead of
// failing; the release's own commit wakes it.
bool waits_for_release(const ClaimInput& input, const domain::Volume& stored,
                       const std::function<bool(const std::string&)>& leaving, domain::Time now);

}  // namespace mooring::controlplane
