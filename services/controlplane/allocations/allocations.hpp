// Allocations room: what the allocation endpoints do, as the volumes room is for the volume ones.
// A submit is checked against the node and volumes it names and placed (a system allocation is a
// group with a copy on every eligible node), a stop takes a group's copies with it, and a plugin
// allocation's task is replaced by a rolling update. Each is one state commit. Answers are values
// (volumes/outcome.hpp: a failure kind and a message naming the allocation); the API only
// translates requests and answers. Pure over the state store: no transport, no agents.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "services/controlplane/volumes/outcome.hpp"
#include "shared/domain/allocation.hpp"

namespace mooring::controlplane {
class StateStore;
}

namespace mooring::controlplane::allocations {

using volumes::Failure;
using volumes::Outcome;

struct PlacedCopy {
  std::string node_id;
  std::string alloc_id;
};

struct Submitted {
  std::string id;
  std::string node_id;  // where a single allocation runs
  bool system = false;
  std::vector<PlacedCopy> copies;  // a group's copies placed with it (more follow as nodes join)
  std::uint64_t index = 0;
};

// `request` as the API parsed it, its namespace set: checked (NodeID, NodeSelector, volumes),
// given an id and the next free index of its name, placed and committed. Not placed: conflict
// naming every node's reason, or unavailable (retry) while a plugin's health is not known yet.
Outcome<Submitted> submit(StateStore& store, domain::Allocation request);

struct Stopped {
  std::uint64_t index = 0;
  bool group = false;  // a system allocation: its live copies stopped with it
  std::size_t stopped_copies = 0;
  std::vector<std::string> warnings;  // plugins whose volumes stay mounted on a node
};

// Stops `current` and, for a group, every live copy (one commit). Already stopping: nothing
// written, its modify index.
Outcome<Stopped> stop(StateStore& store, const domain::Allocation& current);

struct Updated {
  std::uint64_t index = 0;
  domain::Allocation allocation;  // as committed, with its rollout
  std::string new_id;             // a single allocation's replacement (empty for a group)
};

// The rolling update of plugin allocation `current` to `task`. A group rolls node by node (the
// system reconciler); a single allocation gets its replacement beside it at once, stopped once
// the replacement's plugin instance is healthy.
Outcome<Updated> update_task(StateStore& store, const domain::Allocation& current, std::optional<domain::Task> task);

// A group's copies as the API shows them: per node its live copy, else its newest; null for a
// node the group keeps restart bookkeeping for but has no copy on.
std::map<std::string, const domain::Allocation*> shown_copies(const StateStore& store, const domain::Allocation& group);

}  // namespace mooring::controlplane::allocations
