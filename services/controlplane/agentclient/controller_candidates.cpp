// Agent client room (agentclient/): which nodes may take a plugin's controller call (a healthy controller instance on
// a ready node with an address), and why none may, named for the caller's answer.
#include <algorithm>

#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/plugin_facts.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::agentclient {

using domain::in_quotes;

std::vector<std::string> AgentRouter::controller_candidates(const std::string& plugin_id) const {
  std::vector<std::string> out;
  const domain::Plugin* p = store_.plugin(plugin_id);
  if (!p) return out;
  for (const auto& [node_id, inst] : p->controllers) {  // map order: sorted by node id
    if (!inst.healthy || !domain::has_controller(inst.type)) continue;
    const domain::Node* n = store_.node(node_id);
    if (!n || n->status != domain::NodeStatus::ready || n->address.empty()) continue;
    out.push_back(node_id);
  }
  return out;
}

std::string AgentRouter::no_controller_reason(const std::string& plugin_id) const {
  const domain::Plugin* p = store_.plugin(plugin_id);
  if (!p) return "no CSI plugin named " + in_quotes(plugin_id) + " is registered";
  if (p->controllers.empty()) return "plugin " + in_quotes(plugin_id) + " has no controller instances";
  if (!controller_candidates(plugin_id).empty()) return "";
  // After a restart (or an election) nothing is known until the agents are heard from: say so,
  // so the caller waits rather than looks for a broken plugin.
  if (std::ranges::all_of(p->controllers, [](const auto& kv) { return domain::health_unknown(kv.second); })) {
    std::string nodes;
    for (const auto& [node_id, inst] : p->controllers) nodes += (nodes.empty() ? "" : ", ") + in_quotes(node_id);
    return "plugin " + in_quotes(plugin_id) +
           ": whether its controllers are healthy is not known yet: the control "
           "plane has not heard from the agent" +
           (p->controllers.size() > 1 ? "s of nodes " : " of node ") + nodes +
           " since it started leading; retry shortly";
  }
  std::string out = "plugin " + in_quotes(plugin_id) + " has no healthy controller on a ready node (";
  bool first = true;
  for (const auto& [node_id, inst] : p->controllers) {
    const domain::Node* n = store_.node(node_id);
    out += (first ? "" : ", ") + in_quotes(node_id) + ": ";
    first = false;
    if (domain::health_unknown(inst))
      out += "health unknown until its agent is heard from";
    else if (!inst.healthy)
      out += "unhealthy" + (inst.health_description.empty() ? "" : " (" + inst.health_description + ")");
    else if (!n)
      out += "node not registered";
    else if (n->status != domain::NodeStatus::ready)
      out += "node " + std::string(domain::to_string(n->status));
    else
      out += "no agent address";
  }
  return out + ")";
}

}  // namespace mooring::controlplane::agentclient
