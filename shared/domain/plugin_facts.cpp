#include "shared/domain/plugin_facts.hpp"

namespace mooring::domain {

bool health_unknown(const PluginInstance& i) { return !i.healthy && i.health_description == kHealthUnknown; }

bool any_health_unknown(const Plugin& p) {
  for (const auto* map : {&p.controllers, &p.nodes})
    for (const auto& [node, inst] : *map)
      if (health_unknown(inst)) return true;
  return false;
}

std::optional<bool> controller_supports(const Plugin& plugin, bool ControllerInfo::*flag) {
  bool unknown = false;
  for (const auto& [node, inst] : plugin.controllers) {
    if (inst.controller_info && (*inst.controller_info).*flag) return true;
    unknown = unknown || !fingerprinted(inst);
  }
  if (unknown) return std::nullopt;
  return false;
}

}  // namespace mooring::domain
