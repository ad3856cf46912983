// Agent service room (agentservice/): the ControlPlane gRPC service node agents call — register and heartbeat
// (node records, plugin aggregation, liveness), the allocation long poll and status updates,
// volume claims (intent recorded, then ControllerPublish) and the node side of releases.
// Every handler runs as a coroutine on the state store's executor; generated gRPC types stay
// out of this header.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "shared/domain/leader_epoch.hpp"
#include "shared/tls/cert_files.hpp"

namespace grpc {
class Service;
}

namespace mooring::controlplane {

class StateStore;
class NodeLiveness;
class NodeRegistrations;
class ControllerPublisher;
namespace audit {
class AuditLog;
}

struct AgentServiceOptions {
  // WatchAllocations waits at most this long, whatever the agent asks for.
  std::chrono::milliseconds max_watch_wait{std::chrono::minutes(5)};
  // Mutual TLS is on: every call must come with an agent certificate and may act only for the
  // node it names (caller_checks.cpp). A plaintext call is then refused.
  bool require_node_identity = false;
  // Calls that change state (all but WatchAllocations; Heartbeat only when refused, it comes every
  // few seconds from every node) get a line there.
  audit::AuditLog* audit = nullptr;
  // High availability: asked (on the store's executor) before every call. nullopt: this control
  // plane leads and serves. Otherwise it is a standby and the call is answered UNAVAILABLE naming
  // the leader's gRPC address (this string, "" when none is known), in the message and in the
  // trailing metadata `x-mooring-leader`, so the agent switches to it. The state is not touched.
  std::function<std::optional<std::string>()> standby;
  // High availability: asked after `standby`. A reason: this leader is degraded (etcd has no
  // quorum or cannot be reached) and every call is answered UNAVAILABLE with it at once, nothing
  // touched. Heartbeats and allocation watches too: it cannot record a heartbeat's report, and an
  // answer from its memory may be stale (a new leader may be elected elsewhere); naming no leader,
  // the agent tries the next control plane, which is the new leader in that case.
  std::function<std::optional<std::string>()> writes_refused;
  // High availability: awaited before `writes_refused`. A leader whose lease etcd has not
  // confirmed in time (its own raft election) holds the call until it does, for up to one lease
  // (ha/lease_hold.hpp), rather than send the agent to another member; a
  // reason: the hold ran out, and the call is answered UNAVAILABLE with it.
  std::function<boost::asio::awaitable<std::optional<std::string>>()> hold;
  // Told of every registration committed (the agent router resends a call that failed against
  // the node's previous agent to the new one); may be null.
  NodeRegistrations* registrations = nullptr;
  // RenewCertificate signs with this CA (--tls-ca-file and --tls-ca-key-file; without a key it
  // answers FAILED_PRECONDITION) for this long (--node-cert-ttl).
  tls::PairPaths renewal_ca;
  std::chrono::seconds node_cert_ttl{std::chrono::hours(24 * 7)};
  // High availability: this leader's epoch (domain/leader_epoch.hpp), named in every answer to a
  // registration or heartbeat so the agents learn it and refuse calls from an older leader;
  // nullopt: not known yet (the field is left out, and the agent keeps what it knows). Unset: a
  // single control plane, whose answers name the empty epoch.
  std::function<std::optional<domain::LeaderEpoch>()> leader_epoch;
};

class AgentService {
 public:
  // `executor` must be the store's. `publisher` may be null: claims that need a
  // ControllerPublish then answer UNAVAILABLE and record nothing.
  AgentService(boost::asio::any_io_executor executor, StateStore& store, NodeLiveness& liveness,
               ControllerPublisher* publisher, AgentServiceOptions options = {});
  ~AgentService();
  AgentService(const AgentService&) = delete;
  AgentService& operator=(const AgentService&) = delete;

  // Register with rpc::Server (ServerOptions::services); must outlive the server.
  grpc::Service* service();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane
