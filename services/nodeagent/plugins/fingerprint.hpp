// Fingerprinting one plugin instance: asks the plugin what it is and whether it is healthy and
// turns the answers into the mooring.v1.PluginFingerprint the control plane stores per node.
// Logic only: the plugin is reached through PluginClient, so tests use a fake plugin.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>

#include "mooring/v1/types.pb.h"
#include "services/nodeagent/config/agent_config.hpp"
#include "services/nodeagent/plugins/plugin_client.hpp"

namespace mooring::nodeagent {

::mooring::v1::PluginType to_proto(PluginRole role);

class Fingerprinter {
 public:
  // `alloc_id`: the allocation that runs the plugin as a task (reported in every fingerprint).
  Fingerprinter(std::string plugin_id, PluginRole role, std::string alloc_id = {});

  // One full fingerprint: GetPluginInfo, GetPluginCapabilities, Probe, Controller- and/or
  // NodeGetCapabilities, NodeGetInfo (by role). Never fails: a failing call (or an empty CSI node
  // id) yields healthy=false with the reason in health_description; what was learned earlier
  // (provider, capabilities) is kept so the control plane still knows what the plugin is.
  boost::asio::awaitable<::mooring::v1::PluginFingerprint> fingerprint(PluginClient& client);

  // The latest result (an unhealthy placeholder before the first fingerprint).
  const ::mooring::v1::PluginFingerprint& last() const { return last_; }

  // Records a health verdict reached elsewhere (process exited, not yet healthy), keeping the
  // rest of the fingerprint.
  const ::mooring::v1::PluginFingerprint& mark(bool healthy, std::string description);

 private:
  ::mooring::v1::PluginFingerprint last_;
  PluginRole role_;
};

}  // namespace mooring::nodeagent
