// Domain: one allocation's claim on a volume, and where its release stands. Claims are what
// the control plane's claim GC drives to free; LastError/NextAttempt explain a stuck release.
#pragma once

#include "shared/domain/modes.hpp"
#include "shared/domain/time.hpp"

#include <map>
#include <string>

namespace mooring::domain {

struct Claim {
  std::string allocation_id;
  std::string node_id;           // Mooring node id: where node RPCs go
  std::string external_node_id;  // CSI node id (NodeGetInfo.node_id): used in ControllerPublish/Unpublish
  ClaimMode mode = ClaimMode::read;
  AccessMode access_mode = AccessMode::unknown;
  AttachmentMode attachment_mode = AttachmentMode::unknown;
  ClaimState state = ClaimState::taken;
  std::map<std::string, std::string> publish_context;  // from ControllerPublish; storage only
  ControllerPublish controller_publish = ControllerPublish::unknown;  // recorded with the claim's intent
  std::string last_error;  // why the last release step failed ("" when none)
  Time next_attempt{};     // when the release is retried (unset when not waiting)
  Time create_time{};
  Time update_time{};

  bool operator==(const Claim&) const = default;
};

}  // namespace mooring::domain
