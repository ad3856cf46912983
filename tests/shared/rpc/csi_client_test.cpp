#include "shared/rpc/csi_client.hpp"

#include "shared/async/retry.hpp"
#include "shared/async/wake_signal.hpp"
#include "tests/shared/async/run_coro.hpp"
#include "tests/shared/rpc/test_plugin.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>

namespace mooring::rpc {

using namespace std::chrono_literals;
using async::run_coro;

using CsiClientTest = PluginFixture;

TEST_F(CsiClientTest, ProbeNodeGetInfoAndNodePublishRoundTrip) {
  start_plugin();
  asio::io_context io;
  CsiClient client(io.get_executor(), socket_);  // a bare path is accepted
  EXPECT_EQ(client.endpoint(), "unix://" + socket_);
  run_coro(io, [&]() -> asio::awaitable<void> {
    EXPECT_TRUE(co_await client.connect(5s));

    auto probe = co_await client.probe(v1::ProbeRequest{});
    EXPECT_TRUE(probe.ok()) << probe.status.error_message();
    EXPECT_EQ(probe.outcome, csi::Outcome::ok);
    EXPECT_TRUE(probe.response.ready().value());

    auto info = co_await client.node_get_info(v1::NodeGetInfoRequest{});
    EXPECT_TRUE(info.ok());
    EXPECT_EQ(info.response.node_id(), "node-1");

    v1::NodePublishVolumeRequest publish;
    publish.set_volume_id("vol-1");
    publish.set_target_path(dir_ + "/target");
    publish.mutable_volume_capability()->mutable_access_mode()->set_mode(
        v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    auto published = co_await client.node_publish_volume(publish);
    EXPECT_TRUE(published.ok()) << published.status.error_message();
    EXPECT_TRUE(published.done());

    publish.clear_target_path();
    auto invalid = co_await client.node_publish_volume(publish);
    EXPECT_EQ(invalid.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(invalid.outcome, csi::Outcome::final_error);

    auto unimplemented = co_await client.node_get_capabilities(v1::NodeGetCapabilitiesRequest{});
    EXPECT_EQ(unimplemented.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_EQ(unimplemented.outcome, csi::classify(csi::Rpc::NodeGetCapabilities, grpc::StatusCode::UNIMPLEMENTED));
  }());
  EXPECT_EQ(node_.published_target, dir_ + "/target");
}

TEST_F(CsiClientTest, PerCallTimeoutOverridesTheTable) {
  start_plugin();
  identity_.probe_delay_ms = 20000;
  asio::io_context io;
  CsiClient client(io.get_executor(), "unix://" + socket_);
  const auto start = std::chrono::steady_clock::now();
  run_coro(io, [&]() -> asio::awaitable<void> {
    auto probe = co_await client.probe(v1::ProbeRequest{}, {.timeout = 200ms});
    EXPECT_EQ(probe.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_EQ(probe.outcome, csi::classify(csi::Rpc::Probe, grpc::StatusCode::DEADLINE_EXCEEDED));
  }());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(CsiClientTest, SurvivesThePluginRestartingOnTheSameSocket) {
  start_plugin();
  asio::io_context io;
  CsiClient client(io.get_executor(), "unix:" + socket_);
  run_coro(io, [&]() -> asio::awaitable<void> {
    auto before = co_await client.probe(v1::ProbeRequest{});
    EXPECT_TRUE(before.ok()) << before.status.error_message();
  }());

  stop_server();  // the plugin process dies
  io.restart();
  run_coro(io, [&]() -> asio::awaitable<void> {
    auto down = co_await client.probe(v1::ProbeRequest{}, {.timeout = 2s});
    EXPECT_EQ(down.status.error_code(), grpc::StatusCode::UNAVAILABLE) << down.status.error_message();
    EXPECT_EQ(down.outcome, csi::classify(csi::Rpc::Probe, grpc::StatusCode::UNAVAILABLE));
  }());

  start_plugin();  // restarted: the socket is re-created at the same path
  io.restart();
  int attempts = 0;
  bool ok = false;
  const auto start = std::chrono::steady_clock::now();
  run_coro(io, [&]() -> asio::awaitable<void> {
    // The client must pick the new socket up promptly, not after a long reconnect backoff.
    while (!ok && std::chrono::steady_clock::now() - start < 10s) {
      ++attempts;
      auto again = co_await client.probe(v1::ProbeRequest{}, {.timeout = 2s});
      ok = again.ok();
      if (!ok) co_await async::sleep_for(50ms);
    }
  }());
  EXPECT_TRUE(ok);
  EXPECT_LE(attempts, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(CsiClientTest, ClosedClientFailsFastAndCancelsCallsInFlight) {
  start_plugin();
  identity_.probe_delay_ms = 20000;
  asio::io_context io;
  CsiClient client(io.get_executor(), socket_);
  CsiResult<v1::ProbeResponse> in_flight;
  bool in_flight_done = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    in_flight = co_await client.probe(v1::ProbeRequest{});
    in_flight_done = true;
  }, [](std::exception_ptr e) { EXPECT_FALSE(e); });

  const auto start = std::chrono::steady_clock::now();
  run_coro(io, [&]() -> asio::awaitable<void> {
    co_await async::sleep_for(200ms);
    client.close();
    EXPECT_TRUE(client.closed());
    auto after = co_await client.node_get_info(v1::NodeGetInfoRequest{});
    EXPECT_EQ(after.status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(after.status.error_message(), "client closed");
    EXPECT_EQ(after.outcome, csi::classify(csi::Rpc::NodeGetInfo, grpc::StatusCode::UNAVAILABLE));
    EXPECT_FALSE(after.done());
    EXPECT_FALSE(co_await client.connect(1s));
  }());
  io.restart();
  io.run_for(10s);
  ASSERT_TRUE(in_flight_done);
  EXPECT_EQ(in_flight.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(in_flight.status.error_message(), "client closed");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

// The intended caller pattern: async::retry around one client call, classified by the table,
// woken early when the plugin comes back, and stoppable by cancellation.
TEST_F(CsiClientTest, RetryAroundTheClientWakesWhenThePluginReturnsAndStopsOnCancel) {
  asio::io_context io;
  CsiClient client(io.get_executor(), socket_);
  async::WakeSignal plugin_healthy(io.get_executor());
  const async::Backoff slow{.initial = std::chrono::hours(1), .max = std::chrono::hours(1), .jitter = 0.0};
  auto probe_attempt = [&](unsigned) -> asio::awaitable<async::Attempt> {
    auto r = co_await client.probe(v1::ProbeRequest{}, {.timeout = 2s});
    if (r.done()) co_return async::Attempt::ok();
    if (csi::should_retry(r.outcome)) co_return async::Attempt::again(r.status.error_message());
    co_return async::Attempt::final_error(r.status.error_message());
  };

  // No plugin yet: the first attempt fails, the retry sleeps (1h) until the plugin is back.
  async::RetryResult result;
  run_coro(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer later(io, 100ms);
    later.async_wait([&](boost::system::error_code) {
      start_plugin();
      plugin_healthy.notify();
    });
    result = co_await async::retry(probe_attempt, {.backoff = slow, .wake = &plugin_healthy});
  }());
  EXPECT_TRUE(result.ok()) << result.last_error;
  EXPECT_EQ(result.attempts, 2u);

  // Plugin gone again: cancelling the sleeping retry ends it promptly.
  stop_server();
  asio::cancellation_signal cancel;
  bool finished = false;
  asio::co_spawn(io, async::retry(probe_attempt, {.backoff = slow}),
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, async::RetryResult r) {
                   EXPECT_FALSE(e);
                   result = r;
                   finished = true;
                 }));
  asio::steady_timer stop(io, 300ms);
  stop.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  io.restart();
  io.run_for(20s);
  ASSERT_TRUE(finished);
  EXPECT_EQ(result.end, async::RetryEnd::cancelled);
  EXPECT_EQ(result.attempts, 1u);
}

TEST_F(CsiClientTest, ConnectTimesOutWhenNoPluginListens) {
  asio::io_context io;
  CsiClient client(io.get_executor(), socket_);
  const auto start = std::chrono::steady_clock::now();
  bool connected = true;
  run_coro(io, [&]() -> asio::awaitable<void> { connected = co_await client.connect(300ms); }());
  EXPECT_FALSE(connected);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace mooring::rpc
