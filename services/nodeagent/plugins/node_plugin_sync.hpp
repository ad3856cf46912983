// Keeps the volume manager's view of node plugins (volumes/node_plugin_table.hpp) in step with
// supervision: a node (or monolith) instance that is registered and whose latest fingerprint is
// healthy is set healthy with a client for its socket and its STAGE_UNSTAGE and EXPAND_VOLUME capabilities, which
// wakes the unmounts waiting for it; anything else is set unhealthy. Called on every node status
// change; only transitions touch the table.
#pragma once

#include <map>
#include <string>

namespace mooring::nodeagent {

class NodePluginTable;
class NodeStatus;
class PluginClients;
class PluginRegistry;

class NodePluginSync {
 public:
  NodePluginSync(PluginRegistry& registry, NodeStatus& status, PluginClients& clients, NodePluginTable& table)
      : registry_(registry), status_(status), clients_(clients), table_(table) {}

  void sync();

 private:
  struct Known {
    std::string socket;
    bool requires_stage = false;
    bool supports_expand = false;
    bool operator==(const Known&) const = default;
  };
  PluginRegistry& registry_;
  NodeStatus& status_;
  PluginClients& clients_;
  NodePluginTable& table_;
  std::map<std::string, Known> healthy_;
};

}  // namespace mooring::nodeagent
