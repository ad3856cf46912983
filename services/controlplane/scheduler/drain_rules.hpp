// Scheduler room: the order a drain empties a node in. Pure: the drainer (drainer.hpp) gathers
// the node's allocations and claims and carries the decisions out, one commit per step.
//
// Volumes must stay releasable, so the order is:
//   1. workloads marked Migrate: stopped at once, each with its replacement placed on another
//      eligible node in the same commit (the replacement's claim waits for the old one's release);
//   2. other workloads: given until the deadline to finish, then stopped;
//   3. system copies that are workloads: once no other workload is left on the node;
//   4. plugin allocations (Task.CSIPlugin) last: once no workload is left and no claim on the
//      node names a volume of their plugin (its unmounts and detaches are done), also past the
//      deadline: stopping a plugin under its own mounts strands them (Nomad's drain does).
// With IgnoreSystemJobs the system copies (plugins included) stay. The drain is complete when no
// allocation it must stop is left running or stopping.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "shared/domain/allocation.hpp"
#include "shared/domain/node.hpp"

namespace mooring::controlplane::scheduler {

struct DrainInput {
  const domain::DrainStrategy& strategy;
  domain::Time now;
  std::vector<const domain::Allocation*> allocations;  // the node's non-terminal allocations
  // plugin id -> claims on this node of that plugin's volumes (any state until freed)
  std::map<std::string, int> claims_by_plugin;
};

enum class DrainAction {
  migrate,  // stop and place a replacement elsewhere
  stop,     // stop, no replacement
};

struct DrainDecision {
  std::string alloc_id;
  DrainAction action = DrainAction::stop;
  std::string reason;  // for the allocation's event: why now
};

struct DrainStep {
  std::vector<DrainDecision> decisions;  // to carry out now, in this order
  int left = 0;                          // allocations the drain still waits for (stopping ones included)
  std::string waiting;                   // what it waits for, "" when nothing
  bool complete = false;
};

DrainStep plan_drain_step(const DrainInput& input);

// The plugin an allocation serves, or "" for a workload.
std::string served_plugin(const domain::Allocation& alloc);

// The replacement of `old` migrated off its node: a fresh allocation of the same name, index
// (so per-alloc volumes follow), volumes and task, not placed yet.
domain::Allocation migration_replacement(const domain::Allocation& old, std::string id, domain::Time now);

}  // namespace mooring::controlplane::scheduler
