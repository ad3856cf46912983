#include "services/controlplane/claims/claim_plan.hpp"

#include "services/controlplane/claims/publish_outcome.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

namespace {

// The allocation's request for this volume, or null when it does not name it.
const domain::VolumeRequest* requested(const domain::Allocation& alloc, const std::string& volume_key) {
  const domain::VolumeRequest* request = nullptr;
  for (const auto& [name, vr] : alloc.volumes)
    if (domain::claimed_volume_key(alloc, vr) == volume_key) request = &vr;
  return request;
}

// The node's instance of the plugin that can mount volumes, or null.
const domain::PluginInstance* node_instance(const domain::Node& node, const std::string& plugin_id) {
  auto it = node.plugins.find(plugin_id);
  return it != node.plugins.end() && domain::has_node(it->second.type) ? &it->second : nullptr;
}

// A new claim also needs a live allocation, a schedulable volume and a healthy node instance
// that has told us its CSI node id (ControllerPublish needs it). A stopping or ended allocation is
// a state, not a bad request (FAILED_PRECONDITION): its agent, which may not have heard of the
// stop yet, waits and retries until the stop reaches it, and the allocation ends stopped, not
// failed.
Verdict check_new_claim(const std::string& what, const ClaimInput& input, const domain::Volume& volume,
                        const domain::Allocation& alloc, const domain::Plugin* plugin,
                        const domain::PluginInstance* instance) {
  if (domain::is_terminal(alloc) || alloc.desired_status == domain::DesiredStatus::stop)
    return conflict(what + ": the allocation is " +
                    std::string(domain::is_terminal(alloc) ? domain::to_string(alloc.client_status)
                                                           : std::string_view("stopping")) +
                    " and takes no new claims");
  if (auto refused = check_schedulable(volume, plugin)) return refused;
  const std::string& plugin_id = volume.plugin_id;
  if (!instance)
    return unavailable(what + ": node " + in_quotes(input.node_id) + " has not reported a node instance of plugin " +
                       in_quotes(plugin_id) + " yet");
  if (!instance->healthy)
    return unavailable(what + ": plugin " + in_quotes(plugin_id) + " is unhealthy on node " + in_quotes(input.node_id) +
                       (instance->health_description.empty() ? "" : ": " + instance->health_description));
  if (!instance->node_info || instance->node_info->id.empty())
    return unavailable(what + ": plugin " + in_quotes(plugin_id) + " on node " + in_quotes(input.node_id) +
                       " has not reported its CSI node id");
  return std::nullopt;
}

// A new claim's ControllerPublish waits for a release on the same node to detach first
// (publish_outcome.hpp: release_ahead_on_node). Retryable: the agent claims again.
Verdict release_comes_first(const std::string& what, const domain::Volume& volume, const ClaimInput& input) {
  const auto* ahead =
      release_ahead_on_node(volume, input.node_id, input.allocation_id, input.mode == domain::ClaimMode::read);
  if (!ahead) return std::nullopt;
  return unavailable(what + ": the claim of allocation " + in_quotes(ahead->allocation_id) + " on node " +
                     in_quotes(input.node_id) + " is being released (" + std::string(domain::to_string(ahead->state)) +
                     ") and its ControllerUnpublishVolume to the node comes first; retry the claim");
}

}  // namespace

std::string claim_subject(const ClaimInput& input) {
  return "claim of volume " + in_quotes(input.volume_key) + " by allocation " + in_quotes(input.allocation_id);
}

Ruled<ClaimPlan> plan_claim(const ClaimInput& input, const domain::Node* node, const domain::Volume* stored,
                            const domain::Allocation* alloc, const domain::Plugin* plugin, bool can_publish,
                            domain::Time now) {
  const std::string what = claim_subject(input);
  if (!node) return not_found("node not found: " + input.node_id);
  if (!stored) return not_found("volume not found: " + input.volume_key);
  if (!alloc) return not_found("allocation not found: " + input.allocation_id);
  if (alloc->node_id != input.node_id)
    return invalid(what + ": the allocation is placed on node " + in_quotes(alloc->node_id) + ", not on node " +
                   in_quotes(input.node_id));
  const domain::VolumeRequest* request = requested(*alloc, input.volume_key);
  if (!request) return invalid(what + ": the allocation does not request this volume");

  const domain::PluginInstance* instance = node_instance(*node, stored->plugin_id);
  ClaimPlan plan{.volume = *stored, .read_only = input.mode == domain::ClaimMode::read || request->read_only};
  if (auto own = stored->claims.find(input.allocation_id); own != stored->claims.end())
    plan.retry_of_pending = publish_pending(own->second);

  const ClaimRequest cr{.allocation_id = input.allocation_id,
                        .node_id = input.node_id,
                        .external_node_id = instance && instance->node_info ? instance->node_info->id : std::string{},
                        .mode = input.mode,
                        .access_mode = input.access_mode,
                        .attachment_mode = input.attachment_mode};
  auto outcome = take_claim(plan.volume, cr, now);
  if (!outcome) return outcome.refusal();
  plan.outcome = *outcome;
  const bool created = plan.outcome == ClaimOutcome::created;

  if (plan.outcome == ClaimOutcome::unchanged && !plan.retry_of_pending) {
    plan.record = false;  // idempotent re-claim: the stored publish context, no controller call
    return plan;
  }
  if (created)
    if (auto refused = check_new_claim(what, input, *stored, *alloc, plugin, instance)) return *refused;

  // A new claim on a plugin whose facts are not known yet (its controller's agent restarted and
  // has not fingerprinted it again) waits rather than guessing "no" and leaving the release
  // nothing to undo.
  const std::optional<bool> needs_publish =
      plugin ? domain::needs_controller_publish(*plugin) : std::optional<bool>(false);
  if (created && !needs_publish)
    return unavailable(what + ": plugin " + in_quotes(stored->plugin_id) +
                       " advertises a controller service, but no controller instance has reported its "
                       "capabilities yet; retry the claim");
  // A claim waiting for its publish was recorded as needing one: it is sent again whatever the
  // plugin's facts say now (a restarted controller agent reports none until it fingerprinted
  // the plugin again), or the claim would be granted without its publish context.
  plan.publish = plan.retry_of_pending || (created && needs_publish.value_or(false));
  if (plan.publish && !can_publish && created)
    return unavailable(what + ": plugin " + in_quotes(stored->plugin_id) +
                       " needs ControllerPublishVolume and no controller route is configured");
  if (created && plan.publish)
    if (auto refused = release_comes_first(what, *stored, input)) return *refused;
  auto& claim = plan.volume.claims.at(input.allocation_id);
  if (plan.publish) {
    claim.last_error = kPublishPending;  // take_claim clears it; the intent carries it
    claim.controller_publish = domain::ControllerPublish::sent;
  } else if (created) {
    claim.controller_publish = domain::ControllerPublish::not_needed;
  }
  return plan;
}

bool waits_for_release(const ClaimInput& input, const domain::Volume& stored,
                       const std::function<bool(const std::string&)>& leaving, domain::Time now) {
  // Its own claim being released (an uncertain publish undone) is answered at once, as before:
  // the agent's retry decides afresh.
  if (auto own = stored.claims.find(input.allocation_id);
      own != stored.claims.end() && domain::is_past(own->second.state))
    return false;
  domain::Volume after = stored;
  drop_releasing_claims(after, [&](const std::string& id) { return id != input.allocation_id && leaving(id); });
  if (after.claims.size() == stored.claims.size()) return false;  // nothing is being released
  const ClaimRequest request{.allocation_id = input.allocation_id,
                             .node_id = input.node_id,
                             .external_node_id = {},
                             .mode = input.mode,
                             .access_mode = input.access_mode,
                             .attachment_mode = input.attachment_mode};
  return take_claim(after, request, now).ok();
}

}  // namespace mooring::controlplane
