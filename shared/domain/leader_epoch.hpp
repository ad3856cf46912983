// Domain: the leader epoch, the fencing token of control plane -> agent calls (issue 43). With
// etcd it is the etcd cluster's id and the create revision of the leader key the sending control
// plane won: every election creates the key anew, so a later leader of one cluster has a higher
// revision. Every call a control plane makes to an agent carries its epoch (kLeaderEpochHeader),
// and so does every answer to an agent's registration and heartbeat; an agent refuses a call
// whose epoch is older than one it has heard (nodeagent/rpcserver/leader_fence.hpp). A leader
// that was paused or cut off while a call waited in gRPC's queue cannot have it reach a plugin
// after its successor acted: its revision is lower than the one the agents heard since.
// A single control plane on SQLite has no epoch (cluster 0, revision 0).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mooring::domain {

// gRPC metadata key (lower case, as gRPC requires).
inline constexpr const char* kLeaderEpochHeader = "mooring-leader-epoch";

struct LeaderEpoch {
  std::uint64_t cluster = 0;  // etcd's cluster id; 0: no etcd (SQLite)
  std::int64_t revision = 0;  // the leader key's create revision

  bool none() const { return cluster == 0 && revision == 0; }
  bool operator==(const LeaderEpoch&) const = default;

  // "<cluster in hex>/<revision>", e.g. "cdf818194e3a8c32/1207"; what the header and the
  // agent's file hold.
  std::string to_text() const;
  // nullopt for anything to_text() did not write.
  static std::optional<LeaderEpoch> parse(std::string_view text);
};

}  // namespace mooring::domain
