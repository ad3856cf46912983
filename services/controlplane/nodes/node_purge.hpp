// Nodes room: removing a node record for good (Nomad's `node purge`), by an operator or by the node
// GC once a node has been down longer than --node-gc-threshold. Refused while any volume claim
// names the node: its release still needs the node (or an operator detach) and must not lose it.
// Otherwise the node goes with its plugin instances (a plugin left with none goes too), and its
// allocations that are not terminal yet are marked lost.
#pragma once

#include <string>

#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

struct NodePurge {
  Batch batch;
  std::size_t lost_allocations = 0;
  std::size_t plugin_instances = 0;
};

// The writes that purge `node_id`, or why not (naming the node and the volumes that hold it).
// `reason` goes into the event ("purged by an operator", "down since ...").
domain::Expected<NodePurge> plan_node_purge(const StateStore& store, const std::string& node_id,
                                            const std::string& reason, domain::Time now);

}  // namespace mooring::controlplane
