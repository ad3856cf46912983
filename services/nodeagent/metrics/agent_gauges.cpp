#include "services/nodeagent/metrics/agent_gauges.hpp"

namespace mooring::nodeagent {

std::vector<metrics::GaugeSnapshot> agent_gauges(const std::string& node_id,
                                                 const std::vector<::mooring::v1::PluginFingerprint>& fingerprints,
                                                 const std::map<std::string, std::size_t>& pending_unmounts) {
  metrics::GaugeSnapshot healthy{
      "mooring_plugin_healthy", "1 when the plugin's instance on this node is healthy, as last fingerprinted.", {}};
  std::map<std::string, double> pending;
  for (const auto& fp : fingerprints) {
    const bool controller =
        fp.type() == ::mooring::v1::PLUGIN_TYPE_CONTROLLER || fp.type() == ::mooring::v1::PLUGIN_TYPE_MONOLITH;
    const bool node = fp.type() == ::mooring::v1::PLUGIN_TYPE_NODE || fp.type() == ::mooring::v1::PLUGIN_TYPE_MONOLITH;
    const double value = fp.healthy() ? 1.0 : 0.0;
    if (controller)
      healthy.samples.push_back({{{"plugin", fp.plugin_id()}, {"node", node_id}, {"kind", "controller"}}, value});
    if (node) {
      healthy.samples.push_back({{{"plugin", fp.plugin_id()}, {"node", node_id}, {"kind", "node"}}, value});
      pending.emplace(fp.plugin_id(), 0.0);
    }
  }
  // A plugin no longer fingerprinted may still be owed unmounts: those count too.
  for (const auto& [plugin, n] : pending_unmounts) pending[plugin] = static_cast<double>(n);
  metrics::GaugeSnapshot unmounts{
      "mooring_pending_unmounts", "Volume mounts of released allocations still owed NodeUnpublish/NodeUnstage.", {}};
  for (const auto& [plugin, n] : pending) unmounts.samples.push_back({{{"plugin", plugin}}, n});
  return {std::move(healthy), std::move(unmounts)};
}

}  // namespace mooring::nodeagent
