#include "services/nodeagent/plugins/node_plugin_sync.hpp"

#include "services/nodeagent/node_status.hpp"
#include "services/nodeagent/plugins/plugin_clients.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "services/nodeagent/volumes/csi_node_calls.hpp"
#include "services/nodeagent/volumes/node_plugin_table.hpp"

namespace mooring::nodeagent {

void NodePluginSync::sync() {
  std::map<std::string, Known> now;
  for (const auto& inst : registry_.list(PluginKind::node)) {
    const auto fp = status_.fingerprint(inst.reg.plugin_id);
    if (!fp || !fp->healthy()) continue;
    now[inst.reg.plugin_id] =
        Known{inst.reg.socket_path, fp->node_info().requires_node_stage_volume(), fp->node_info().supports_expand()};
  }
  for (const auto& [id, known] : healthy_) {
    if (!now.contains(id)) table_.set_unhealthy(id);
  }
  for (const auto& [id, known] : now) {
    auto it = healthy_.find(id);
    if (it != healthy_.end() && it->second == known) continue;
    table_.set_healthy(id, NodePlugin{std::make_shared<CsiNodeCalls>(clients_.get(known.socket)), known.requires_stage,
                                      known.supports_expand});
  }
  healthy_ = std::move(now);
}

}  // namespace mooring::nodeagent
