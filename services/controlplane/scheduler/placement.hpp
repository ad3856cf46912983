// Scheduler room: which node an allocation runs on. Pure: it reads a view of the cluster and
// returns a node or, for every node, why it was rejected — so a 409 explains itself.
//
// A node fits when it is ready and eligible (not drained or marked ineligible), lets the task run as its user (the rules the node reports:
// domain/task_user.hpp) and, for every volume the allocation requests, runs a healthy
// node instance of the volume's plugin, lies in the volume's topology, stays within the
// plugin's max volumes on that node, and the claim would succeed there (the claim rules
// dry-run on a copy of the volume). Among fitting nodes the least loaded (fewest non-terminal
// allocations) wins; ties go to the smallest node id so placement is predictable.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shared/domain/allocation.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane {

class StateStore;

struct ClusterView {
  const std::map<std::string, domain::Node>& nodes;
  const std::map<std::string, domain::Plugin>& plugins;
  const std::map<std::string, domain::Volume>& volumes;
  const std::map<std::string, domain::Allocation>& allocations;
  // How many non-terminal allocations a node runs (its load). The state store keeps them
  // indexed by node, so placing costs the nodes and volumes it looks at, not every allocation.
  std::function<std::size_t(const std::string& node_id)> live_allocations_on;
  // Allocations the same commit stops (a drain's migrations): their claims are being released.
  const std::set<std::string>* stopping = nullptr;
};
ClusterView cluster_view(const StateStore& store);

struct NodeRejection {
  std::string node_id;
  std::string reason;
};

struct PlacementResult {
  std::optional<std::string> node_id;  // set when placed
  // When not placed: a reason for the whole cluster (e.g. a plugin with no healthy controllers)
  // and/or one per node considered.
  std::string cluster_reason;
  std::vector<NodeRejection> rejections;
  // Not placed while the health of an instance of a plugin it needs is not known yet (its agent
  // not heard from since this control plane started leading): worth a retry in a moment.
  bool health_unknown = false;

  // 'allocation "web" cannot be placed: node "a": ...; node "b": ...'
  std::string message(const domain::Allocation& alloc) const;
};

// Places `alloc` (its id and index must be set). With alloc.node_id set only that node is
// checked; otherwise every node. Volumes the allocation names must exist (the API checks that
// first); a missing one is reported, not assumed.
PlacementResult place(const domain::Allocation& alloc, const ClusterView& cluster);

// Does the node's topology (its plugin instance's accessible topology) satisfy one of the
// volume's topologies? A topology is satisfied when each of its segments has the same value on
// the node. The volume's own topologies (from the plugin) are used when known, else its
// required topology request; none means anywhere.
bool topology_allows(const domain::Volume& volume, const std::map<std::string, std::string>& node_topology);

// The lowest index not used by a non-terminal allocation named `name` among `allocations` (the
// allocations with that name; others are skipped): the N of its per_alloc volume sources
// ("data[N]"), so a replacement allocation gets its predecessor's volume.
int next_alloc_index(const std::vector<const domain::Allocation*>& allocations, const std::string& name);

}  // namespace mooring::controlplane
