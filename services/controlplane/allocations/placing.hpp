// Allocations room (internal): placement's answer as the room's failure.
#pragma once

#include "services/controlplane/allocations/allocations.hpp"
#include "services/controlplane/scheduler/placement.hpp"

namespace mooring::controlplane::allocations {

// Not placed: conflict naming why each node was refused; unavailable (retry) while a plugin's
// health there is not known yet.
inline Failure unplaced(const PlacementResult& placed, const domain::Allocation& a) {
  return {placed.health_unknown ? Failure::Kind::unavailable : Failure::Kind::conflict, placed.message(a)};
}

}  // namespace mooring::controlplane::allocations
