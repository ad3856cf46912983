// End-to-end support: gRPC calls made as a node agent (or as anyone) straight to the control
// plane's agent port, with whichever certificate a test holds, to check what a certificate may do.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "shared/rpc/channel.hpp"
#include "shared/rpc/transport_security.hpp"
#include "tests/support/test_pki.hpp"

namespace mooring::e2e {

// A channel presenting `cert` (null: plaintext) that trusts the peer only as `peer`.
inline std::shared_ptr<grpc::Channel> agent_channel(const std::string& target, const test::TlsPaths* cert,
                                                    tls::Identity peer = {tls::Role::server, {}}) {
  rpc::ChannelOptions options;
  if (cert) {
    auto security = rpc::TransportSecurity::load({cert->ca, cert->cert, cert->key});
    EXPECT_TRUE(security) << security.error();
    if (security) options.security = *security;
  }
  options.peer = std::move(peer);
  return rpc::make_channel(target, options);
}

// One blocking call with a 5 s deadline.
template <class Call>
grpc::Status call_with_deadline(Call&& fn) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return fn(ctx);
}

inline grpc::Status heartbeat_as(const std::shared_ptr<grpc::Channel>& ch, const std::string& node_id) {
  auto stub = v1::ControlPlane::NewStub(ch);
  v1::HeartbeatRequest req;
  req.set_node_id(node_id);
  v1::HeartbeatResponse resp;
  return call_with_deadline([&](grpc::ClientContext& ctx) { return stub->Heartbeat(&ctx, req, &resp); });
}

// WatchAllocations without waiting; `allocations` gets how many came back.
inline grpc::Status watch_as(const std::shared_ptr<grpc::Channel>& ch, const std::string& node_id,
                             int* allocations = nullptr) {
  auto stub = v1::ControlPlane::NewStub(ch);
  v1::WatchAllocationsRequest req;
  req.set_node_id(node_id);
  v1::WatchAllocationsResponse resp;
  auto st = call_with_deadline([&](grpc::ClientContext& ctx) { return stub->WatchAllocations(&ctx, req, &resp); });
  if (allocations) *allocations = resp.allocations_size();
  return st;
}

}  // namespace mooring::e2e
