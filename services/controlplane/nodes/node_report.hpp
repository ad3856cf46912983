// Nodes room: what a node's registration, heartbeat or loss changes in the state — the node
// record with its plugin instances, and the events to store. Pure: callers read the current
// node, plan the change here, and commit it as one batch. The plugins' aggregates follow the
// node's instances in the store (state/plugin_aggregates.hpp): a report never copies or writes
// what other nodes run, so it costs the same at 10 nodes as at 10,000.
//
// Heartbeats are frequent and mostly say "nothing changed": a plan is empty unless a
// fingerprint (ignoring its update time), the node's status or its events changed, so 1000
// nodes heartbeating every few seconds do not write 1000 rows each time. Liveness itself is
// tracked in memory (nodes/liveness.hpp).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shared/domain/event.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

class Batch;

inline constexpr std::size_t kMaxNodeEvents = 50;  // per node, newest kept

// The planned change of one report.
struct NodeChange {
  domain::Node node;  // the node as it should be stored
  bool node_changed = false;
  std::vector<domain::Event> events;  // store events

  bool empty() const { return !node_changed && events.empty(); }
  // Adds everything to `batch` (the node only when it changed).
  void stage(Batch& batch) const;
};

struct NodeRegistration {
  std::string node_id;
  std::string name;
  std::string address;
  std::map<std::string, std::string> attributes;
  std::string agent_version;           // kept as attribute "mooring.agent_version"
  domain::Time certificate_expires{};  // of the certificate it called with; unset in plaintext
  std::string certificate_key_sha256;  // of that certificate's public key; empty in plaintext
};

// Registration (first or again after an agent restart): the node is stored ready with the given
// identity, its full fingerprint set folded in, and a "node registered" event recorded.
NodeChange plan_registration(const domain::Node* current, const NodeRegistration& registration,
                             std::vector<domain::PluginInstance> plugins, domain::Time now);

// A heartbeat with the node's full fingerprint set (a plugin absent from it is removed from the
// node; its aggregate goes with its last instance) and the node events new since the last one.
// A node that was down comes back ready.
NodeChange plan_heartbeat(const domain::Node& current, std::vector<domain::PluginInstance> plugins,
                          std::vector<domain::NodeEvent> events, domain::Time now);

// The node missed its heartbeats: down, with every plugin instance on it unhealthy (so nothing
// is placed there and the plugin's healthy counts drop), and the reason recorded.
NodeChange plan_node_down(const domain::Node& current, const std::string& reason, domain::Time now);

// This control plane starts leading and has not heard from the node's agent: what the state says
// of its plugin instances is from before, so each healthy one counts as unknown (not healthy,
// domain::kHealthUnknown; its facts and update time kept) until the agent registers or
// heartbeats. The node keeps its status: liveness gives it a TTL of grace. Empty when nothing on
// the node is healthy.
NodeChange plan_unknown_until_heard(const domain::Node& current);

}  // namespace mooring::controlplane
