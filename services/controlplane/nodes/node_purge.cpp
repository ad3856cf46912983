#include "services/controlplane/nodes/node_purge.hpp"

#include "services/controlplane/nodes/node_identity.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

domain::Expected<NodePurge> plan_node_purge(const StateStore& store, const std::string& node_id,
                                            const PurgeRequest& request, domain::Time now) {
  const domain::Node* node = store.node(node_id);
  if (!node) return domain::error("node not found: " + node_id);
  const std::string& reason = request.reason;
  if (node->status != domain::NodeStatus::down && !request.force)
    return domain::error("node " + in_quotes(node_id) + " is live (status " +
                         std::string(domain::to_string(node->status)) +
                         ", heartbeating): purging it would cut off a running agent; stop the agent and purge the node "
                         "once it is down, or force it with ?force=true and a management token");
  std::string holding;
  for (const auto& [vid, v] : store.volumes())
    for (const auto& [alloc, c] : v.claims)
      if (c.node_id == node_id) {
        holding += (holding.empty() ? "" : ", ") + in_quotes(vid) + " (allocation " + in_quotes(alloc) + ", " +
                   std::string(domain::to_string(c.state)) + ")";
        break;
      }
  if (!holding.empty())
    return domain::error("node " + in_quotes(node_id) + " still holds claims on volumes " + holding +
                         "; they are released first (or detach them: DELETE /v1/volume/csi/ID/detach?node=" + node_id +
                         ")");

  NodePurge out;
  // The node's instances go with its row; the plugins' aggregates follow (a plugin with none left goes).
  out.plugin_instances = node->plugins.size() + node->split_controllers.size();
  for (const auto& alloc_id : store.live_allocation_ids_on(node_id)) {
    domain::Allocation a = *store.allocation(alloc_id);
    a.client_status = domain::ClientStatus::lost;
    a.events.push_back({now, "NodePurged", "node " + in_quotes(node_id) + " was purged: " + reason});
    out.batch.put(std::move(a));
    ++out.lost_allocations;
  }
  out.batch.erase_node(node_id);
  std::map<std::string, std::string> details{{"plugin_instances", std::to_string(out.plugin_instances)},
                                             {"lost_allocations", std::to_string(out.lost_allocations)}};
  if (request.revoke) {
    auto identity = identity_of(store.node_identity(node_id), node_id);
    revoke(identity, now);
    details["identity_generation"] = std::to_string(identity.generation);
    details["certificates_revoked_before"] = domain::format_time(now);
    out.batch.put(std::move(identity));
  }
  out.batch.add_event({.topic = "Node",
                       .type = "NodePurged",
                       .key = node_id,
                       .message = "node " + in_quotes(node_id) + " purged: " + reason,
                       .details = std::move(details)});
  return out;
}

}  // namespace mooring::controlplane
