// Nodes room: removing a node record for good (Nomad's `node purge`), by an operator or by the node
// GC once a node has been down longer than --node-gc-threshold. Refused while any volume claim
// names the node: its release still needs the node (or an operator detach) and must not lose it.
// Otherwise the node goes with its plugin instances (a plugin left with none goes too), and its
// allocations that are not terminal yet are marked lost.
// An operator's purge also revokes the node's identity (nodes/node_identity.hpp: its certificates
// issued until now no longer act), and is refused while the node is live unless forced: purging a
// running agent's record and enrolling its id again was how a node:write token took a node over.
// The node GC's purge (a node down for long) leaves the identity alone: the agent may come back.
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

struct PurgeRequest {
  std::string reason;   // goes into the event ("purged by an operator", "down since ...")
  bool revoke = false;  // an operator's purge: the node's certificates issued until now are refused
  bool force = false;   // a live node too (the route asks a management token for it)
};

// The writes that purge `node_id`, or why not (naming the node and what holds it: the volumes
// that claim it, or its being live).
domain::Expected<NodePurge> plan_node_purge(const StateStore& store, const std::string& node_id,
                                            const PurgeRequest& request, domain::Time now);

}  // namespace mooring::controlplane
