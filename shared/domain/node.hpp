// Domain: a client node running a Mooring node agent — its status, attributes, the plugins it
// fingerprinted and its recent events.
#pragma once

#include "shared/domain/modes.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/time.hpp"

#include <cstdint>
#include <map>
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
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const Node&) const = default;
};

}  // namespace mooring::domain
