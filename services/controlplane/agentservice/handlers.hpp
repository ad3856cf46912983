// Agent API room (internal): the handlers behind the ControlPlane service and what they share.
// Each reads the store, plans with the pure rules, and commits at most one batch per step
// without suspending in between; only WatchAllocations (waiting) and ClaimVolume (the claim
// path's controller call) suspend, and both re-read the store afterwards.
#pragma once

#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <grpcpp/support/status.h>

#include "mooring/v1/controlplane.pb.h"
#include "services/controlplane/agentservice/agent_service.hpp"
#include "services/controlplane/claims/claim_path.hpp"
#include "services/controlplane/claims/refusal.hpp"
#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::agentservice {

struct Context {
  Context(boost::asio::any_io_executor ex, StateStore& s, NodeLiveness& l, ControllerPublisher* p, AgentServiceOptions o)
      : executor(ex), store(s), liveness(l), options(o), claims(ex, s, p) {}

  boost::asio::any_io_executor executor;
  StateStore& store;
  NodeLiveness& liveness;
  AgentServiceOptions options;
  ClaimPath claims;
  log::Logger log{"agentservice"};
};

// ---- status helpers ----
grpc::Status invalid_argument(std::string message);
grpc::Status not_found(std::string message);
grpc::Status unavailable(std::string message);
// invalid -> INVALID_ARGUMENT, not_found -> NOT_FOUND, conflict -> FAILED_PRECONDITION (the
// agent retries: the holder's claim is being released), unavailable -> UNAVAILABLE.
grpc::Status to_status(const Refusal& refusal);
// A failed commit (the state could not be made durable): UNAVAILABLE, logged.
grpc::Status write_failed(Context& ctx, const std::string& what, const std::string& error);
// validate_id as a status (INVALID_ARGUMENT naming the kind of id and why), or OK.
grpc::Status check_id(domain::IdKind kind, const std::string& id);

// ---- node identity (caller_checks.cpp) ----
// Who is calling, from the connection's certificate.
struct Caller {
  bool checked = false;  // false: plaintext (--insecure), nothing to check
  std::string node_id;   // the node the certificate names; empty: it names none
  std::string subject;   // the certificate's subject, for the log line of a refusal
  std::string certificate;  // PEM; empty in plaintext. Only node records read it (its expiry).
};
// OK, or PERMISSION_DENIED (logged) when the request acts for a node other than the caller's.
grpc::Status check_caller(Context&, const Caller&, const v1::RegisterNodeRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::HeartbeatRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::WatchAllocationsRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::UpdateAllocationsRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::ClaimVolumeRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::UnpublishVolumeRequest&);

// ---- handlers ----
// The caller's certificate expiry (mutual TLS) is kept on the node record.
grpc::Status register_node(Context&, const v1::RegisterNodeRequest&, v1::RegisterNodeResponse&, const Caller&);
grpc::Status heartbeat(Context&, const v1::HeartbeatRequest&, v1::HeartbeatResponse&, const Caller&);
boost::asio::awaitable<grpc::Status> watch_allocations(Context&, const v1::WatchAllocationsRequest&,
                                                       v1::WatchAllocationsResponse&);
grpc::Status update_allocations(Context&, const v1::UpdateAllocationsRequest&, v1::UpdateAllocationsResponse&);
boost::asio::awaitable<grpc::Status> claim_volume(Context&, const v1::ClaimVolumeRequest&, v1::ClaimVolumeResponse&);
grpc::Status unpublish_volume(Context&, const v1::UnpublishVolumeRequest&, v1::UnpublishVolumeResponse&);

}  // namespace mooring::controlplane::agentservice
