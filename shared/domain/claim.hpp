// Domain: one allocation's claim on a volume, and where its release stands. Claims are what
// the control plane's claim GC drives to free; LastError/NextAttempt explain a stuck release.
#pragma once

#include "shared/domain/modes.hpp"
#include "shared/domain/time.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace mooring::domain {

// NodeGetVolumeStats where the claim's allocation uses the volume, as its node last reported it.
struct VolumeUsage {
  std::int64_t bytes_available = 0, bytes_total = 0, bytes_used = 0;
  std::int64_t inodes_available = 0, inodes_total = 0, inodes_used = 0;  // 0 when not reported
  Time update_time{};
  bool operator==(const VolumeUsage&) const = default;
};

// The plugin's VolumeCondition (when it advertises VOLUME_CONDITION).
struct VolumeCondition {
  bool abnormal = false;
  std::string message;
  Time update_time{};
  bool operator==(const VolumeCondition&) const = default;
};

// How the volume was given the task's group where the claim's allocation uses it: by the node
// plugin (`by` "VOLUME_MOUNT_GROUP") or by the agent under the volume's GroupChangePolicy
// ("OnRootMismatch", "Always", "None"); `walked` when the agent changed the tree at that mount.
struct VolumeOwnership {
  std::int64_t group = 0;
  std::string by;
  bool walked = false;
  Time update_time{};
  bool operator==(const VolumeOwnership&) const = default;
};

// One report of a node agent: the volume (its key) as one allocation uses it.
struct VolumeStatsReport {
  std::string volume_id;
  std::string alloc_id;
  std::optional<VolumeUsage> usage;
  std::optional<VolumeCondition> condition;
  std::optional<VolumeOwnership> ownership;
  bool operator==(const VolumeStatsReport&) const = default;
};

struct Claim {
  std::string allocation_id;
  std::string node_id;           // Mooring node id: where node RPCs go
  std::string external_node_id;  // CSI node id (NodeGetInfo.node_id): used in ControllerPublish/Unpublish
  ClaimMode mode = ClaimMode::read;
  AccessMode access_mode = AccessMode::unknown;
  AttachmentMode attachment_mode = AttachmentMode::unknown;
  ClaimState state = ClaimState::taken;
  std::map<std::string, std::string> publish_context;                 // from ControllerPublish; storage only
  ControllerPublish controller_publish = ControllerPublish::unknown;  // recorded with the claim's intent
  std::string last_error;                                             // why the last release step failed ("" when none)
  Time next_attempt{};  // when the release is retried (unset when not waiting)
  Time create_time{};
  Time update_time{};
  std::optional<VolumeUsage> usage;          // from the node's stats; unset until reported
  std::optional<VolumeCondition> condition;  // likewise
  std::optional<VolumeOwnership> ownership;  // likewise: set by a task that is not root

  bool operator==(const Claim&) const = default;
};

}  // namespace mooring::domain
