// Domain: a row of the control plane's event table — what changed, at which state index, and
// why — served by the events API so a stuck release or an unhealthy plugin explains itself.
#pragma once

#include "shared/domain/time.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace mooring::domain {

struct Event {
  std::uint64_t index = 0;  // the state index of the write that produced it
  Time time{};
  std::string topic;  // "Volume", "Plugin", "Node", "Allocation", "Claim"
  std::string type;   // "ClaimReleased", "NodeDown", "PluginUnhealthy", ...
  std::string ns;     // the namespace of a volume, claim or allocation; empty for nodes and plugins
  std::string key;    // the id of the object it is about
  std::string message;
  std::map<std::string, std::string> details;  // never secrets
  // The writer's CLOCK_MONOTONIC (ns) at the commit: orders the event against other processes'
  // records on the same host (the chaos checker, docs/chaos.md); meaningless across hosts.
  std::int64_t monotonic_ns = 0;
  bool operator==(const Event&) const = default;
};

}  // namespace mooring::domain
