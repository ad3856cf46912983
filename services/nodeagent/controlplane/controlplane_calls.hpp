// The control plane calls the allocation side of the agent makes (the link in
// controlplane_link.hpp does registration and heartbeats): the allocation long poll, status
// updates, claims and the node-side unpublish. A consumer-side interface, so the alloc runner,
// the CSI hook and the watch loop are unit-tested with a fake; the gRPC implementation is below.
// Failures are grpc::Status values.
#pragma once

#include "shared/rpc/channel.hpp"

#include <grpcpp/support/status.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "mooring/v1/controlplane.pb.h"

namespace mooring::nodeagent {

class ControlPlaneCalls {
 public:
  virtual ~ControlPlaneCalls() = default;
  // Long poll: the deadline is the request's wait_ms plus the call timeout.
  virtual boost::asio::awaitable<grpc::Status> watch_allocations(const ::mooring::v1::WatchAllocationsRequest& request,
                                                                 ::mooring::v1::WatchAllocationsResponse& response) = 0;
  virtual boost::asio::awaitable<grpc::Status> update_allocations(
      const ::mooring::v1::UpdateAllocationsRequest& request) = 0;
  virtual boost::asio::awaitable<grpc::Status> claim_volume(const ::mooring::v1::ClaimVolumeRequest& request,
                                                            ::mooring::v1::ClaimVolumeResponse& response) = 0;
  virtual boost::asio::awaitable<grpc::Status> unpublish_volume(
      const ::mooring::v1::UnpublishVolumeRequest& request) = 0;
};

class ControlPlaneTarget;  // controlplane_target.hpp

// The control planes of `--controlplane-addr a,b,c`, shared by the calls and the link.
std::shared_ptr<ControlPlaneTarget> make_controlplane_target(const std::string& addresses, rpc::ChannelOptions channel);

struct GrpcControlPlaneOptions {
  std::string address;                         // host:port or unix:path; a comma-separated list of control planes
  std::shared_ptr<ControlPlaneTarget> target;  // made from `address` and `channel` when null
  rpc::ChannelOptions channel;                 // mutual TLS (channel.security) when set
  std::chrono::milliseconds call_timeout{std::chrono::seconds(10)};
  // Called after every call: answered = the control plane answered (any status but UNAVAILABLE,
  // DEADLINE_EXCEEDED, CANCELLED). Feeds the "how long have we been disconnected" clock and the
  // "control plane is back" wake.
  std::function<void(bool answered)> on_contact;
};

std::unique_ptr<ControlPlaneCalls> make_grpc_controlplane_calls(GrpcControlPlaneOptions options);

}  // namespace mooring::nodeagent
