// The rpc room: the gRPC <-> Asio bridge (client calls, callback server, channels) and the
// typed CSI client. This file: awaiting one unary callback-API call from a coroutine.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <grpcpp/support/status.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace grpc {
class ClientContext;
}

namespace mooring::rpc {

struct CallOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};  // per attempt; every call has one
  bool wait_for_ready = false;  // false: fail fast with UNAVAILABLE while the channel cannot connect
  // Sent with the call (keys lower case), e.g. the leader epoch (domain/leader_epoch.hpp).
  std::vector<std::pair<std::string, std::string>> metadata;
};

using UnaryDone = std::function<void(grpc::Status)>;
// Starts exactly one callback-API call on `context` and hands `done` to gRPC, e.g.
//   [&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
//     stub->async()->Probe(ctx, &request, &response, std::move(done));
//   }
// Request and response must outlive the co_await (locals of the awaiting coroutine do).
using StartUnary = std::function<void(grpc::ClientContext* context, UnaryDone done)>;

// Runs one unary call with a fresh ClientContext (deadline = now + timeout) and returns its
// status. RPC failures are values, never exceptions. The completion is posted back to the
// awaiting coroutine's executor, so no Mooring code runs on gRPC threads. Cancelling the
// awaiting coroutine calls ClientContext::TryCancel() and still waits for gRPC's callback
// (usually CANCELLED) before the context is destroyed.
boost::asio::awaitable<grpc::Status> unary(CallOptions options, StartUnary start);

}  // namespace mooring::rpc
