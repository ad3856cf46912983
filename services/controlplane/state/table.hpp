// State room: the tables of the control plane's state. Claims live inside their volume (one
// write covers a volume and its claims), so a change to a claim is a change to `volumes`.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace mooring::controlplane {

// `requests`: the answers kept for Idempotency-Key retries (state/idempotent_request.hpp).
// `acl_policies`, `acl_tokens`: the ACL room's records (acl/policy.hpp, acl/token.hpp).
// `node_identities`: each node's accepted certificate and introduction tokens (domain/node_identity.hpp).
// `keyring`: the wrapped data keys that seal secrets (secrets/data_keys.hpp); the sealing layer
// reads and writes it, the store never sees it.
// `snapshots`: whose each snapshot Mooring took is (state/snapshot_record.hpp).
// `namespaces`: the namespaces and their quotas (state/namespace_record.hpp).
enum class Table {
  volumes,
  plugins,
  nodes,
  allocations,
  events,
  requests,
  acl_policies,
  acl_tokens,
  keyring,
  node_identities,
  snapshots,
  namespaces
};

inline constexpr std::array<Table, 12> kAllTables{Table::volumes,         Table::plugins,    Table::nodes,
                                                  Table::allocations,     Table::events,     Table::requests,
                                                  Table::acl_policies,    Table::acl_tokens, Table::keyring,
                                                  Table::node_identities, Table::snapshots,  Table::namespaces};

// "volumes", "plugins", ...: the storage name.
std::string_view to_string(Table t);
std::optional<Table> parse_table(std::string_view name);

}  // namespace mooring::controlplane
