#include "services/controlplane/gc/release_rules.hpp"
#include "services/controlplane/claims/publish_outcome.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::gc {

using domain::in_quotes;

using domain::ClaimState;

namespace {

ReleaseDecision advance(ClaimState to, std::string reason) {
  ReleaseDecision d;
  d.action = ReleaseAction::advance;
  d.to = to;
  d.reason = std::move(reason);
  return d;
}

ReleaseDecision node_step(const domain::Claim& c, const ReleaseView& view) {
  if (c.access_mode == domain::AccessMode::unknown)
    return advance(ClaimState::node_detached, "no access mode was recorded: the client already unmounted");
  if (!view.node)
    return advance(ClaimState::node_detached, "node " + in_quotes(c.node_id) + " is gone; nothing to unmount there");
  if (view.node->status != domain::NodeStatus::down) {
    ReleaseDecision d;
    d.action = ReleaseAction::detach_node;
    d.reason = "unmount on node " + in_quotes(c.node_id);
    return d;
  }
  domain::Time abandon = abandon_time(*view.node, view.allocation);
  if (domain::is_set(abandon) && view.now >= abandon)
    return advance(ClaimState::node_detached,
                   "node " + in_quotes(c.node_id) + " is down and allocation " + in_quotes(c.allocation_id) +
                       " passed stop_after_client_disconnect: its node plugin is treated as abandoned "
                       "(the agent unmounts on its own side)");
  ReleaseDecision d;
  d.action = ReleaseAction::wait_for_node;
  d.retry_at = abandon;
  if (domain::is_set(abandon))
    d.reason = "node " + in_quotes(c.node_id) + " is down; its node plugin counts as abandoned at " +
               domain::format_time(abandon) + " (stop_after_client_disconnect of allocation " +
               in_quotes(c.allocation_id) + ")";
  else
    d.reason = "node " + in_quotes(c.node_id) + " is down; waiting for it to return or for an operator detach";
  return d;
}

ReleaseDecision controller_step(const domain::Volume& v, const domain::Claim& c, const ReleaseView& view) {
  if (!view.plugin) {
    ReleaseDecision d;
    d.action = ReleaseAction::wait_for_controller;
    d.reason = "no CSI plugin named " + in_quotes(v.plugin_id) + " is registered; waiting for it to detach the volume";
    return d;
  }
  // What the claim path recorded decides; the plugin's current facts only for claims recorded
  // before that was kept, and unknown facts are waited for, never read as "not needed".
  switch (c.controller_publish) {
    case domain::ControllerPublish::not_needed:
      return advance(
          ClaimState::controller_detached,
          "plugin " + in_quotes(v.plugin_id) + " did not need ControllerPublishVolume when the claim was taken");
    case domain::ControllerPublish::sent: break;
    case domain::ControllerPublish::unknown: {
      auto needed = domain::needs_controller_publish(*view.plugin);
      if (!needed) {
        ReleaseDecision d;
        d.action = ReleaseAction::wait_for_controller;
        d.reason = "plugin " + in_quotes(v.plugin_id) +
                   " advertises a controller service but no controller instance has reported its capabilities yet";
        return d;
      }
      if (!*needed)
        return advance(ClaimState::controller_detached,
                       "plugin " + in_quotes(v.plugin_id) + " has no controller with PUBLISH_UNPUBLISH_VOLUME");
      break;
    }
  }
  // The last claim to leave a node detaches it: until then the device is still in use there.
  // A claim whose own ControllerPublish is still unconfirmed does not count yet: if that publish
  // fails for certain the claim is dropped without a release, and a detach left to it would
  // never be sent (the volume stayed published to the node with no claim: found by the chaos
  // checker, docs/chaos.md). Wait for its outcome instead. (The other order, a new claim's
  // publish while this detach is under way, is refused by the claim path: release_ahead_on_node.)
  std::string pending;
  for (const auto& [alloc, other] : v.claims) {
    if (alloc == c.allocation_id || other.node_id != c.node_id) continue;
    if (!domain::is_before(other.state, ClaimState::controller_detached)) continue;
    if (publish_pending(other)) {
      pending = alloc;
      continue;
    }
    return advance(ClaimState::controller_detached,
                   "allocation " + in_quotes(alloc) + " on the same node " + in_quotes(c.node_id) +
                       " still claims the volume; the controller detach is left to the last claim");
  }
  if (!pending.empty()) {
    ReleaseDecision d;
    d.action = ReleaseAction::wait_for_controller;
    d.reason = "allocation " + in_quotes(pending) + " on the same node " + in_quotes(c.node_id) +
               " waits for its ControllerPublishVolume; the controller detach waits for its outcome";
    return d;
  }
  std::string csi_node = c.external_node_id;
  if (csi_node.empty()) {
    auto it = view.plugin->nodes.find(c.node_id);
    if (it != view.plugin->nodes.end() && it->second.node_info) csi_node = it->second.node_info->id;
  }
  if (csi_node.empty())
    return advance(ClaimState::controller_detached,
                   "no CSI node id is known for node " + in_quotes(c.node_id) +
                       "; a controller detach cannot name the node, and an empty node id would detach it everywhere");
  ReleaseDecision d;
  d.action = ReleaseAction::unpublish_controller;
  d.external_node_id = csi_node;
  d.reason = "detach from CSI node " + in_quotes(csi_node);
  return d;
}

}  // namespace

domain::Time node_down_since(const domain::Node& node) {
  // The liveness loop records "node down: <reason>" as the node's newest cluster event; any
  // newer cluster event means the node came back since, and the heartbeat is the better anchor.
  for (auto it = node.events.rbegin(); it != node.events.rend(); ++it) {
    if (it->subsystem != "cluster") continue;
    if (it->message.rfind("node down", 0) == 0) return std::max(it->time, node.last_heartbeat);
    break;
  }
  return node.last_heartbeat;
}

domain::Time abandon_time(const domain::Node& node, const domain::Allocation* allocation) {
  if (!allocation || allocation->stop_after_client_disconnect <= domain::Duration::zero()) return domain::Time{};
  return node_down_since(node) + allocation->stop_after_client_disconnect;
}

std::vector<std::string> release_steps_left(const domain::Volume& volume,
                                            const std::function<ReleaseView(const domain::Claim&)>& view_of) {
  std::vector<std::string> out;
  domain::Volume v = volume;
  for (auto& [alloc, c] : v.claims) {
    const auto from = c.state;
    for (int i = 0; i < 8; ++i) {
      auto d = decide_release(v, c, view_of(c));
      if (d.action == ReleaseAction::advance) {
        c.state = d.to;
        continue;
      }
      if (d.action != ReleaseAction::free)
        out.push_back("allocation " + in_quotes(alloc) + " (" + std::string(domain::to_string(from)) +
                      "): " + d.reason);
      break;
    }
  }
  return out;
}

ReleaseDecision decide_release(const domain::Volume& v, const domain::Claim& c, const ReleaseView& view) {
  switch (c.state) {
    case ClaimState::taken:
    case ClaimState::unpublishing: return node_step(c, view);
    case ClaimState::node_detached: return controller_step(v, c, view);
    case ClaimState::controller_detached:
    case ClaimState::ready_to_free: break;
  }
  ReleaseDecision d;
  d.action = ReleaseAction::free;
  d.reason = "released";
  return d;
}

}  // namespace mooring::controlplane::gc
