// Claims room: a node's volume stats (NodeGetVolumeStats, polled by its agent) folded into the
// claims they are about — usage and condition per claim — and an event when a claim's volume
// turns abnormal or recovers. Pure: the caller reads the volumes, plans here, and commits the
// change with the heartbeat that carried the reports.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "shared/domain/event.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane {

// The stored volume of a key (domain::volume_key), or null.
using VolumeByKey = std::function<const domain::Volume*(const std::string& key)>;

struct VolumeHealthChange {
  std::vector<domain::Volume> volumes;  // to store
  std::vector<domain::Event> events;    // VolumeConditionAbnormal / VolumeConditionNormal
  bool empty() const { return volumes.empty() && events.empty(); }
};

// Reports about an unknown volume, or a claim that is not `node_id`'s or no longer taken, are
// dropped: the claim moved on since the agent polled. A condition first reported normal raises
// no event; abnormal (first, or after normal) and normal after abnormal do.
VolumeHealthChange plan_volume_stats(const std::string& node_id, const std::vector<domain::VolumeStatsReport>& reports,
                                     const VolumeByKey& volume);

}  // namespace mooring::controlplane
