// Claims room: the pure rules for registering, updating and deregistering volumes. The API layer
// reads the current volume and plugin, asks these rules for the volume to store, and commits it
// only when allowed.
//
// Fields the API never returns (Secrets, MountFlags shown as "[REDACTED]") and optional maps
// left out of an update keep their stored values, so a dashboard's read-modify-write cannot wipe
// a volume's secrets.
#pragma once

#include <functional>
#include <string>

#include "services/controlplane/claims/refusal.hpp"
#include "shared/domain/allocation.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane {

struct VolumePlan {
  domain::Volume volume;  // what to store (indexes are stamped by the store)
  bool created = false;   // a new registration
  // The requested minimum capacity is above the known capacity: the controller must expand the
  // volume (ControllerExpandVolume) before the new minimum is met.
  bool expand = false;
};

// Register (existing == nullptr) or update `requested` (as decoded from the API) against the
// stored volume and its plugin. Immutable: plugin id, external id, parameters. Capabilities may
// change only while still including the mode in use; mount options not while in use; the
// topology request not once the volume has topologies; capacity only grows.
Ruled<VolumePlan> plan_volume_register(const domain::Volume* existing, domain::Volume requested,
                                       const domain::Plugin* plugin);

// A modify (ControllerModifyVolume) of `wanted` mutable parameters. Refused: an empty request or
// key (400); a key the volume did not declare in MutableParameters at create/register, naming
// whether it is an immutable Parameters key (400); a volume being deleted or deregistered, or
// with a claim whose release is under way (409, naming the allocation and the claim's state: the
// release runs against the volume as it was published). Taken claims do not stop it: CSI
// modifies online.
Verdict check_modify(const domain::Volume& volume, const domain::StringMap& wanted);

// Allocation lookup for deregistration; null when the allocation is gone (treated as terminal).
using AllocationLookup = std::function<const domain::Allocation*(const std::string& id)>;

// Deregistration is refused while any claim exists, unless `force` and every claimant is
// terminal (then the claims are dropped with the volume; nothing is detached).
Verdict check_deregister(const domain::Volume& volume, bool force, const AllocationLookup& allocation);

}  // namespace mooring::controlplane
