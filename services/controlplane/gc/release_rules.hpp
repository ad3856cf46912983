// GC room: the pure rules of a claim's release (Nomad's volumewatcher + csi_endpoint Unpublish,
// as a resumable state machine). Given the volume, one past claim and what the cluster looks
// like now, decide the next step: call the node agent, call a controller, skip a step (and say
// why), wait for a down node, or free the claim. No I/O; the ClaimGc applies the decision.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shared/domain/allocation.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/time.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane::gc {

struct ReleaseView {
  const domain::Plugin* plugin = nullptr;          // the volume's plugin (null: not registered)
  const domain::Node* node = nullptr;              // the claim's node (null: gone)
  const domain::Allocation* allocation = nullptr;  // the claim's allocation (null: gone)
  domain::Time now{};
};

enum class ReleaseAction {
  detach_node,           // ask the claim's node agent to unmount (NodeDetachVolume)
  wait_for_node,         // the node is down and its plugin not (yet) abandoned: wait, visibly
  unpublish_controller,  // ControllerUnpublishVolume through a healthy controller
  wait_for_controller,   // the controller step is needed but no controller is known: retry later
  advance,               // no RPC needed: move the claim to `to` (a skipped step)
  free,                  // the release is complete: remove the claim
};

struct ReleaseDecision {
  ReleaseAction action = ReleaseAction::free;
  domain::ClaimState to = domain::ClaimState::ready_to_free;  // for advance
  std::string reason;                                         // why (events, logs, LastError when waiting)
  domain::Time retry_at{};       // wait_for_node: when the node plugin counts as abandoned (unset: never)
  std::string external_node_id;  // unpublish_controller: the CSI node id
};

ReleaseDecision decide_release(const domain::Volume& volume, const domain::Claim& claim, const ReleaseView& view);

// What still has to happen outside the control plane before the volume's past claims can all be
// dropped: one line per claim whose release needs a node or controller step (or waits for one),
// naming the allocation, its state and the step. Empty when every claim can be freed by skips
// alone. The claims are walked in turn on a copy, so two claims on one node cannot each leave
// the controller detach to the other. `view_of` gives the view for one claim.
std::vector<std::string> release_steps_left(const domain::Volume& volume,
                                            const std::function<ReleaseView(const domain::Claim&)>& view_of);

// When the node went down: the time of its latest "down" event, else its last heartbeat (the
// instant from which a disconnected agent counts its own stop_after_client_disconnect).
domain::Time node_down_since(const domain::Node& node);

// For an allocation on a down node: the time at which stop_after_client_disconnect has passed,
// or unset when the allocation has no such setting.
domain::Time abandon_time(const domain::Node& node, const domain::Allocation* allocation);

}  // namespace mooring::controlplane::gc
