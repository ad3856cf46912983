// Test support: plugins as the store keeps them. A plugin's aggregate follows the instances its
// nodes' rows hold (services/controlplane/state/plugin_aggregates.hpp), so a test puts the
// nodes that run it, not the aggregate.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/plugin.hpp"

namespace mooring::controlplane::fixtures {

// `node` with `plugin`'s instances on it added, as its agent would report them: a monolith or a
// lone controller or node instance in `plugins`, a split plugin's controller beside its node
// instance in `split_controllers`.
inline domain::Node running(domain::Node node, const domain::Plugin& plugin) {
  auto find = [&](const std::map<std::string, domain::PluginInstance>& m) -> const domain::PluginInstance* {
    auto it = m.find(node.id);
    return it == m.end() ? nullptr : &it->second;
  };
  const auto* controller = find(plugin.controllers);
  const auto* instance = find(plugin.nodes);
  if (controller && instance && controller->type == domain::PluginType::monolith) {
    // One process in both maps; a test that changed one map's copy means that side of it.
    domain::PluginInstance merged = *controller;
    merged.node_info = instance->node_info;
    node.plugins[plugin.id] = std::move(merged);
    return node;
  }
  if (instance) node.plugins[plugin.id] = *instance;
  if (controller && !instance) node.plugins[plugin.id] = *controller;
  if (controller && instance) node.split_controllers[plugin.id] = *controller;
  return node;
}

// Puts the nodes that run `plugins` so that each plugin's aggregate is the one given (a test's
// "put this plugin"): the nodes of `nodes`, then the nodes `store` holds that a plugin names or
// runs on, then a ready node at an unreachable address for any other node an instance names;
// each with exactly the instances the plugins have on it.
inline void put_running(Batch& batch, const std::vector<domain::Plugin>& plugins, const StateStore* store = nullptr,
                        std::vector<domain::Node> nodes = {}) {
  std::map<std::string, domain::Node> by_id;
  for (auto& n : nodes) by_id[n.id] = std::move(n);
  auto add = [&](const std::string& node_id) {
    if (by_id.contains(node_id)) return;
    if (const domain::Node* stored = store ? store->node(node_id) : nullptr) {
      by_id[node_id] = *stored;
      return;
    }
    domain::Node n;
    n.id = node_id;
    n.address = "127.0.0.1:1";
    n.status = domain::NodeStatus::ready;
    by_id[node_id] = std::move(n);
  };
  for (const auto& p : plugins) {
    for (const auto* instances : {&p.controllers, &p.nodes})
      for (const auto& [node_id, inst] : *instances) add(node_id);
    if (store)
      for (const auto& [node_id, n] : store->nodes())
        if (n.plugins.contains(p.id)) add(node_id);
  }
  for (auto& [id, n] : by_id) {
    for (const auto& p : plugins) {
      n.plugins.erase(p.id);
      n.split_controllers.erase(p.id);
      n = running(std::move(n), p);
    }
    batch.put(std::move(n));
  }
}

}  // namespace mooring::controlplane::fixtures
