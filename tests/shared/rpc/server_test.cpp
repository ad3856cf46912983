#include "shared/rpc/server.hpp"

#include "shared/rpc/channel.hpp"
#include "shared/rpc/client_call.hpp"
#include "tests/shared/async/run_coro.hpp"
#include "tests/shared/rpc/test_plugin.hpp"

#include <boost/asio/co_spawn.hpp>
#include <grpcpp/channel.h>

#include <future>

namespace mooring::rpc {

using namespace std::chrono_literals;
using async::run_coro;

namespace {
asio::awaitable<grpc::Status> probe(v1::Identity::Stub& stub, std::chrono::milliseconds timeout, bool* ready = nullptr) {
  v1::ProbeRequest request;
  v1::ProbeResponse response;
  auto status = co_await unary({.timeout = timeout}, [&](grpc::ClientContext* ctx, UnaryDone done) {
    stub.async()->Probe(ctx, &request, &response, std::move(done));
  });
  if (ready) *ready = response.ready().value();
  co_return status;
}
}  // namespace

using ServerTest = PluginFixture;

TEST_F(ServerTest, TcpPortZeroReportsTheChosenPortAndServesCoroutineHandlers) {
  start_server("127.0.0.1:0");
  ASSERT_GT(server_->port(), 0);
  auto identity = v1::Identity::NewStub(make_channel("127.0.0.1:" + std::to_string(server_->port())));
  auto node = v1::Node::NewStub(make_channel("127.0.0.1:" + std::to_string(server_->port())));
  asio::io_context io;
  grpc::Status probe_status, info_status;
  bool ready = false;
  v1::NodeGetInfoResponse info;
  run_coro(io, [&]() -> asio::awaitable<void> {
    probe_status = co_await probe(*identity, 5s, &ready);
    v1::NodeGetInfoRequest request;
    info_status = co_await unary({.timeout = 5s}, [&](grpc::ClientContext* ctx, UnaryDone done) {
      node->async()->NodeGetInfo(ctx, &request, &info, std::move(done));
    });
  }());
  EXPECT_TRUE(probe_status.ok()) << probe_status.error_message();
  EXPECT_TRUE(ready);
  EXPECT_TRUE(info_status.ok()) << info_status.error_message();
  EXPECT_EQ(info.node_id(), "node-1");
  EXPECT_EQ(info.max_volumes_per_node(), 7);
}

TEST_F(ServerTest, UnimplementedMethodsAnswerUnimplemented) {
  start_plugin();
  auto node = v1::Node::NewStub(make_channel(socket_));
  asio::io_context io;
  grpc::Status status;
  run_coro(io, [&]() -> asio::awaitable<void> {
    v1::NodeGetCapabilitiesRequest request;
    v1::NodeGetCapabilitiesResponse response;
    status = co_await unary({.timeout = 5s}, [&](grpc::ClientContext* ctx, UnaryDone done) {
      node->async()->NodeGetCapabilities(ctx, &request, &response, std::move(done));
    });
  }());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ServerTest, UnusableAddressIsReportedNotThrown) {
  std::string error;
  auto server = Server::start(ServerOptions{.address = "unix:" + dir_ + "/no/such/dir/csi.sock",
                                            .services = {&identity_}},
                              error);
  EXPECT_FALSE(server);
  EXPECT_NE(error.find("no/such/dir"), std::string::npos) << error;
}

// One listener per address: gRPC's default SO_REUSEPORT would let a second server bind beside the
// first (two agents on one port, each taking half of the calls).
TEST_F(ServerTest, ASecondServerOnTheSameAddressIsRefused) {
  start_server("127.0.0.1:0");
  const std::string address = "127.0.0.1:" + std::to_string(server_->port());
  std::string error;
  auto second = Server::start(ServerOptions{.address = address, .services = {&identity_}}, error);
  EXPECT_FALSE(second);
  EXPECT_NE(error.find(address), std::string::npos) << error;
  EXPECT_NE(error.find("address in use"), std::string::npos) << error;
}

TEST_F(ServerTest, AwaitableShutdownCancelsInFlightHandlersWhileTheIoContextRuns) {
  start_plugin();
  identity_.probe_delay_ms = 30000;
  auto stub = v1::Identity::NewStub(make_channel(socket_));

  // Client: a probe that would take 30s.
  asio::io_context client_io;
  grpc::Status status;
  bool client_done = false;
  asio::co_spawn(client_io, probe(*stub, 60s), [&](std::exception_ptr e, grpc::Status s) {
    EXPECT_FALSE(e);
    status = s;
    client_done = true;
  });
  std::thread client([&] { client_io.run_for(30s); });
  ASSERT_TRUE([&] {
    for (int i = 0; i < 500 && identity_.probes == 0; ++i) std::this_thread::sleep_for(10ms);
    return identity_.probes == 1;
  }());

  // Shutdown awaited on the *server's* io_context: it must not deadlock on the handler it waits for.
  std::promise<void> stopped;
  const auto start = std::chrono::steady_clock::now();
  asio::co_spawn(server_io_, server_->shutdown(200ms), [&](std::exception_ptr e) {
    EXPECT_FALSE(e);
    stopped.set_value();
  });
  ASSERT_EQ(stopped.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  client.join();
  ASSERT_TRUE(client_done);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(identity_.probes_cancelled, 1);
  server_.reset();
}

}  // namespace mooring::rpc
