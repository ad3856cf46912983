// Bench helper: the fingerprint a simulated node agent reports for its one node-only plugin
// (mooring-bench-claims, mooring-bench-nodes): no controller, so nothing is ever called back.
#pragma once

#include <chrono>
#include <string>

#include "mooring/v1/types.pb.h"

namespace mooring::bench {

inline v1::PluginFingerprint sim_fingerprint(const std::string& plugin, const std::string& node) {
  v1::PluginFingerprint p;
  p.set_plugin_id(plugin);
  p.set_type(v1::PLUGIN_TYPE_NODE);
  p.set_healthy(true);
  p.set_health_description("healthy");
  p.set_provider("sim.mooring.dev");
  p.set_version("1.0");
  p.mutable_node_info()->set_csi_node_id("csi-" + node);
  p.set_update_time_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  return p;
}

}  // namespace mooring::bench
