// The rpcserver room: the NodeAgent gRPC service the control plane calls on this node (seed 000's
// "shim"). NodeDetachVolume unmounts through the volume manager; NodeExpandVolume calls the node
// plugin's NodeExpandVolume on the published path; controller calls are forwarded unchanged to
// the controller plugin running here and answer with the plugin's own status. A plugin that is
// not registered or not healthy on this node answers UNAVAILABLE "plugin <id> not running on
// node <node>", so the control plane tries another node.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <string>

namespace grpc {
class Service;
}

namespace mooring::nodeagent {

class LeaderFence;
class NodeStatus;
class OperationCache;
class PluginManager;
class VolumeManager;

struct NodeAgentServiceDeps {
  std::string node_id;
  VolumeManager& volumes;
  PluginManager& plugins;  // the controller instances the forwarded calls go to
  // Mutual TLS is on: only the control plane (a spiffe://mooring/server certificate) may call;
  // another node's agent or a CLI certificate from the same CA gets PERMISSION_DENIED.
  bool require_controlplane = false;
  // Controller calls that carry an operation id run once through it; null: every call reaches
  // the plugin (as calls without an id always do).
  OperationCache* operations = nullptr;
  // The plugins' fingerprints (their controller capabilities): an unpublish cut off by an agent
  // restart is checked against the plugin first when it reports published nodes. Null: resent.
  const NodeStatus* status = nullptr;
  // Every call's leader epoch is checked against the newest one heard (leader_fence.hpp); null:
  // not checked (unit tests of one handler).
  LeaderFence* fence = nullptr;
};

// The handlers run as coroutines on `ex`.
std::unique_ptr<grpc::Service> make_nodeagent_service(boost::asio::any_io_executor ex, NodeAgentServiceDeps deps);

}  // namespace mooring::nodeagent
