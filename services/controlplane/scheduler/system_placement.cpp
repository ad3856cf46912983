#include "services/controlplane/scheduler/system_placement.hpp"

#include <fnmatch.h>

#include "shared/domain/text.hpp"

namespace mooring::controlplane {

std::optional<std::string> check_node_selector(const std::map<std::string, std::string>& selector) {
  for (const auto& [key, value] : selector) {
    std::string field = "field \"NodeSelector." + key + "\"";
    if (key.empty()) return std::string("field \"NodeSelector\": keys must not be empty");
    if (value.empty()) return field + ": value must not be empty";
  }
  return std::nullopt;
}

bool selector_matches(const std::map<std::string, std::string>& selector, const domain::Node& node) {
  for (const auto& [key, value] : selector) {
    if (key == "name" || key == "id") {
      const std::string& text = key == "name" ? node.name : node.id;
      if (::fnmatch(value.c_str(), text.c_str(), 0) != 0) return false;
      continue;
    }
    auto it = node.attributes.find(key);
    if (it == node.attributes.end() || it->second != value) return false;
  }
  return true;
}

bool system_eligible(const domain::Allocation& group, const domain::Node& node) {
  return node.status == domain::NodeStatus::ready && node.eligible && selector_matches(group.node_selector, node);
}

bool is_live_copy(const domain::Allocation& copy) {
  return copy.desired_status == domain::DesiredStatus::run && !domain::is_terminal(copy);
}

domain::Allocation make_system_copy(const domain::Allocation& group, const std::string& node_id, std::string id,
                                    domain::Time now) {
  domain::Allocation c;
  c.ns = group.ns;
  c.id = std::move(id);
  c.name = group.name;
  c.node_id = node_id;
  c.desired_status = domain::DesiredStatus::run;
  c.client_status = domain::ClientStatus::pending;
  c.volumes = group.volumes;
  c.task = group.task;
  c.stop_after_client_disconnect = group.stop_after_client_disconnect;
  c.index = group.index;
  c.system_id = group.id;
  c.events = {
      {now, "Received", "copy of system allocation " + domain::in_quotes(group.id) + " placed on node " + node_id}};
  return c;
}

}  // namespace mooring::controlplane
