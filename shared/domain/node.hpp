// Domain: a client node running a Mooring node agent — its status, attributes, the plugins it
// fingerprinted and its recent events.
#pragma once

#include "shared/domain/modes.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/time.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mooring::domain {

struct NodeEvent {
  Time time{};
  std::string subsystem;  // "plugin", "alloc", "volume", "agent", "cluster"
  std::string message;
  std::map<std::string, std::string> details;
  bool operator==(const NodeEvent&) const = default;
};

// An operator's drain of a node (Nomad's DrainStrategy), set while it runs: the node takes no new
// placement; allocations marked to migrate are replaced on other nodes at once, the others get
// until the deadline, plugin allocations go last, after the unmounts they serve.
struct DrainStrategy {
  Duration deadline{0};             // how long allocations that do not migrate may run on (0: stopped at once)
  Time started{};                   // when the drain was asked for
  Time force_deadline{};            // started + deadline: the rest is stopped from then on
  bool ignore_system_jobs = false;  // system allocations' copies stay on the node
  bool operator==(const DrainStrategy&) const = default;
};

// The last drain's progress, kept after it ends (Nomad's LastDrain).
struct DrainStatus {
  std::string status;  // draining|complete|canceled
  Time started{};
  Time updated{};
  int allocations_left = 0;  // non-terminal allocations the drain still waits for
  std::string message;       // what it waits for now, or why it ended
  bool operator==(const DrainStatus&) const = default;
};

struct Node {
  std::string id;
  std::string name;
  std::string address;  // the node agent's gRPC endpoint (host:port)
  NodeStatus status = NodeStatus::initializing;
  std::map<std::string, std::string> attributes;
  std::map<std::string, PluginInstance> plugins;  // plugin id -> this node's fingerprint
  // plugin id -> the controller instance of a plugin that runs split on this node (a controller
  // and a node process or socket of one id); its node instance is the one in `plugins`.
  std::map<std::string, PluginInstance> split_controllers;
  Time last_heartbeat{};
  // The not-after time of the certificate the agent last called with (mutual TLS); unset in
  // plaintext. `mooring node status` shows it, so renewals are not missed.
  Time certificate_expires{};
  // The hex SHA-256 of that certificate's public key: node enrollment signs a new certificate
  // for a live node only for this key (services/controlplane/nodes/enrollment.hpp).
  std::string certificate_key_sha256;
  std::vector<NodeEvent> events;  // newest last; capped by the control plane
  // Scheduling eligibility (an operator's, or a drain's): an ineligible node takes no new
  // placement; what runs there goes on running.
  bool eligible = true;
  std::optional<DrainStrategy> drain;  // set while a drain runs
  std::optional<DrainStatus> last_drain;
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const Node&) const = default;
};

}  // namespace mooring::domain
