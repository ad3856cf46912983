// Agent service room (agentservice/, internal): the handlers behind the ControlPlane service and what they share.
// Each reads the store, plans with the pure rules, and commits at most one batch per step
// without suspending in between; only WatchAllocations (waiting) and ClaimVolume (the claim
// path's controller call) suspend, and both re-read the store afterwards.
#pragma once

#include <string>
#include <unordered_map>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <grpcpp/support/status.h>

#include "mooring/v1/controlplane.pb.h"
#include "services/controlplane/agentservice/agent_service.hpp"
#include "services/controlplane/claims/claim_path.hpp"
#include "services/controlplane/claims/refusal.hpp"
#include "shared/domain/ids.hpp"
#include "shared/domain/node_identity.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::agentservice {

struct Context {
  Context(boost::asio::any_io_executor ex, StateStore& s, NodeLiveness& l, ControllerPublisher* p,
          AgentServiceOptions o)
      : executor(ex), store(s), liveness(l), options(o), claims(ex, s, p) {}

  boost::asio::any_io_executor executor;
  StateStore& store;
  NodeLiveness& liveness;
  AgentServiceOptions options;
  ClaimPath claims;
  std::unordered_map<std::string, domain::NodeCertificate> certificates;  // presented_certificate's cache, by PEM
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
  bool checked = false;     // false: plaintext (--insecure), nothing to check
  std::string node_id;      // the node the certificate names; empty: it names none
  std::string subject;      // the certificate's subject, for the log line of a refusal
  std::string certificate;  // PEM; empty in plaintext
  // What a node identity tells certificates apart by (serial, key, issued, expires), read from
  // `certificate` by presented_certificate before the checks; empty in plaintext.
  domain::NodeCertificate presented;
};
// The certificate's facts, parsed once per distinct certificate: OpenSSL 3 takes hundreds of
// microseconds to decode one, and every call of every agent brings its own. Empty when it
// cannot be read (then it acts for nobody).
const domain::NodeCertificate& presented_certificate(Context&, const std::string& pem);
// OK, or PERMISSION_DENIED (logged) when the request acts for a node other than the caller's,
// or UNAUTHENTICATED (logged) when the certificate no longer acts for its node: expired, replaced
// by a re-enrollment or a renewal, or issued before an operator purged the node
// (nodes/node_identity.hpp).
grpc::Status check_caller(Context&, const Caller&, const v1::RegisterNodeRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::HeartbeatRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::WatchAllocationsRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::UpdateAllocationsRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::ClaimVolumeRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::UnpublishVolumeRequest&);
grpc::Status check_caller(Context&, const Caller&, const v1::RenewCertificateRequest&);

// ---- handlers ----
// The caller's certificate expiry (mutual TLS) is kept on the node record.
grpc::Status register_node(Context&, const v1::RegisterNodeRequest&, v1::RegisterNodeResponse&, const Caller&);
grpc::Status heartbeat(Context&, const v1::HeartbeatRequest&, v1::HeartbeatResponse&, const Caller&);
boost::asio::awaitable<grpc::Status> watch_allocations(Context&, const v1::WatchAllocationsRequest&,
                                                       v1::WatchAllocationsResponse&);
grpc::Status update_allocations(Context&, const v1::UpdateAllocationsRequest&, v1::UpdateAllocationsResponse&);
boost::asio::awaitable<grpc::Status> claim_volume(Context&, const v1::ClaimVolumeRequest&, v1::ClaimVolumeResponse&);
grpc::Status unpublish_volume(Context&, const v1::UnpublishVolumeRequest&, v1::UnpublishVolumeResponse&);
// Signs a renewal for the caller's node (renewal.cpp); it acts once the agent calls with it.
grpc::Status renew_certificate(Context&, const v1::RenewCertificateRequest&, v1::RenewCertificateResponse&,
                               const Caller&);
// The caller's first call with its renewed certificate makes it the node's current one: the
// writes for that (none when it is not the pending renewal). Registration and heartbeats ask.
void stage_adopted_renewal(Context&, const Caller&, Batch& batch);

}  // namespace mooring::controlplane::agentservice
