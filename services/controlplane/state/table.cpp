#include "services/controlplane/state/table.hpp"

namespace mooring::controlplane {

std::string_view to_string(Table t) {
  switch (t) {
    case Table::volumes: return "volumes";
    case Table::plugins: return "plugins";
    case Table::nodes: return "nodes";
    case Table::allocations: return "allocations";
    case Table::events: return "events";
    case Table::requests: return "requests";
    case Table::acl_policies: return "acl_policies";
    case Table::acl_tokens: return "acl_tokens";
    case Table::keyring: return "keyring";
    case Table::snapshots: return "snapshots";
    case Table::node_identities: return "node_identities";
    case Table::namespaces: return "namespaces";
  }
  return "unknown";
}

std::optional<Table> parse_table(std::string_view name) {
  for (auto t : kAllTables)
    if (to_string(t) == name) return t;
  return std::nullopt;
}

}  // namespace mooring::controlplane
