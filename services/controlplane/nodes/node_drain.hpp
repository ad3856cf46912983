// Nodes room: an operator's scheduling eligibility and drain of a node, as the commits that set
// them. Pure over the state: the API parses the request, the scheduler's drainer
// (scheduler/drainer.hpp) carries a drain out. An ineligible node takes no new placement;
// a drain makes the node ineligible and stays so after it ends (an operator marks it eligible).
#pragma once

#include <optional>
#include <string>

#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

// Nomad's default drain deadline.
inline constexpr domain::Duration kDefaultDrainDeadline = std::chrono::hours(1);

// The writes that set `node_id`'s eligibility, or why not (a draining node's eligibility is the
// drain's: cancel the drain first). Nothing to change: an empty batch.
domain::Expected<Batch> plan_eligibility(const StateStore& store, const std::string& node_id, bool eligible,
                                         domain::Time now);

struct DrainRequest {
  bool enable = true;  // false: cancel a running drain (the node stays ineligible unless `mark_eligible`)
  domain::Duration deadline = kDefaultDrainDeadline;
  bool ignore_system_jobs = false;
  bool mark_eligible = false;  // with a cancel: the node takes placements again
};

// The writes that start (or restart with a new deadline) or cancel the drain of `node_id`.
domain::Expected<Batch> plan_drain(const StateStore& store, const std::string& node_id, const DrainRequest& request,
                                   domain::Time now);

}  // namespace mooring::controlplane
