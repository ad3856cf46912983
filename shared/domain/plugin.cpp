// Plugin aggregation: the per-plugin record is a fold over the per-node fingerprints, so it
// can always be recomputed from them.
#include "shared/domain/plugin.hpp"

namespace mooring::domain {

void recount(Plugin& plugin) {
  plugin.controllers_expected = static_cast<int>(plugin.controllers.size());
  plugin.nodes_expected = static_cast<int>(plugin.nodes.size());
  plugin.controllers_healthy = 0;
  plugin.nodes_healthy = 0;
  const PluginInstance* newest = nullptr;
  auto consider = [&](const PluginInstance& i) {
    if (newest == nullptr || i.update_time > newest->update_time) newest = &i;
  };
  for (const auto& [node, i] : plugin.controllers) {
    if (i.healthy) ++plugin.controllers_healthy;
    consider(i);
  }
  for (const auto& [node, i] : plugin.nodes) {
    if (i.healthy) ++plugin.nodes_healthy;
    consider(i);
  }
  if (newest != nullptr) {
    plugin.provider = newest->provider;
    plugin.version = newest->version;
  }
  // A controller is required when any instance advertises CONTROLLER_SERVICE.
  plugin.controller_required = false;
  for (const auto* map : {&plugin.controllers, &plugin.nodes}) {
    for (const auto& [node, i] : *map) plugin.controller_required |= i.requires_controller_plugin;
  }
}

void upsert_instance(Plugin& plugin, const PluginInstance& instance) {
  set_node_instances(plugin, instance.node_id, {instance});
}

void set_node_instances(Plugin& plugin, const std::string& node_id, const std::vector<PluginInstance>& instances) {
  bool controller = false;
  bool node = false;
  for (const auto& instance : instances) {
    if (plugin.id.empty()) plugin.id = instance.plugin_id;
    if (has_controller(instance.type)) {
      plugin.controllers[node_id] = instance;
      controller = true;
    }
    if (has_node(instance.type)) {
      plugin.nodes[node_id] = instance;
      node = true;
    }
  }
  if (!controller) plugin.controllers.erase(node_id);
  if (!node) plugin.nodes.erase(node_id);
  recount(plugin);
}

bool remove_node(Plugin& plugin, const std::string& node_id) {
  const bool removed = plugin.controllers.erase(node_id) + plugin.nodes.erase(node_id) > 0;
  if (removed) recount(plugin);
  return removed;
}

bool fingerprinted(const PluginInstance& i) {
  if (has_controller(i.type) && !i.controller_info) return false;
  if (has_node(i.type) && !i.node_info) return false;
  return true;
}

std::optional<bool> needs_controller_publish(const Plugin& plugin) {
  bool controller_reported = false;
  for (const auto& [node, inst] : plugin.controllers) {
    if (!inst.controller_info) continue;
    controller_reported = true;
    if (inst.controller_info->supports_attach_detach) return true;
  }
  if (controller_reported) return false;
  // No controller facts: the plugin needs none only when a fingerprinted instance says it has
  // no controller service at all.
  bool any_fingerprinted = false;
  for (const auto* map : {&plugin.controllers, &plugin.nodes})
    for (const auto& [node, inst] : *map) {
      if (!fingerprinted(inst)) continue;
      any_fingerprinted = true;
      if (inst.requires_controller_plugin) return std::nullopt;
    }
  if (any_fingerprinted && !plugin.controller_required) return false;
  return std::nullopt;
}

}  // namespace mooring::domain
