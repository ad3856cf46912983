#include "services/nodeagent/volumes/node_plugin_table.hpp"

namespace mooring::nodeagent {

NodePluginTable::NodePluginTable(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}

void NodePluginTable::set_healthy(const std::string& plugin_id, NodePlugin plugin) {
  running_[plugin_id] = std::move(plugin);
  healthy_again(plugin_id).notify();
}

void NodePluginTable::set_unhealthy(const std::string& plugin_id) { running_.erase(plugin_id); }

std::optional<NodePlugin> NodePluginTable::find(const std::string& plugin_id) {
  auto it = running_.find(plugin_id);
  if (it == running_.end()) return std::nullopt;
  return it->second;
}

async::WakeSignal& NodePluginTable::healthy_again(const std::string& plugin_id) {
  auto& signal = signals_[plugin_id];
  if (!signal) signal = std::make_unique<async::WakeSignal>(executor_);
  return *signal;
}

}  // namespace mooring::nodeagent
