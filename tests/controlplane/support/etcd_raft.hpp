// Test support: which member of a real etcd cluster (tests/support/etcd_process.hpp) is etcd's own
// raft leader, read from each member's /metrics (`etcd_server_is_leader 1`). Killing the raft
// leader tests etcd's election (1-2 s with its defaults); killing a follower tests our client.
#pragma once

#include <optional>
#include <string>

#include "tests/controlplane/support/http_client.hpp"
#include "tests/support/etcd_process.hpp"

namespace mooring::test {

// The running member whose /metrics say `etcd_server_is_leader <1 or 0>`, nullopt when none does.
inline std::optional<std::size_t> etcd_member_where_leader_is(EtcdCluster& cluster, bool leader) {
  const std::string line = std::string("etcd_server_is_leader ") + (leader ? "1" : "0");
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (!cluster.member(i).running()) continue;
    const auto& ep = cluster.member(i).endpoint();
    const auto port = static_cast<std::uint16_t>(std::stoi(ep.substr(ep.rfind(':') + 1)));
    if (controlplane::http_request(port, "GET", "/metrics").body.find(line) != std::string::npos) return i;
  }
  return std::nullopt;
}

}  // namespace mooring::test
