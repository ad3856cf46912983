#include "shared/rpc/client_call.hpp"

#include "shared/async/with_timeout.hpp"
#include "shared/rpc/channel.hpp"
#include "tests/shared/async/run_coro.hpp"
#include "tests/shared/rpc/test_plugin.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <grpcpp/channel.h>

namespace mooring::rpc {

using namespace std::chrono_literals;
using async::run_coro;

namespace {
// Polls `condition` (set by another thread) for up to `limit`.
template <class F>
bool eventually(F condition, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}
}  // namespace

class ClientCallTest : public PluginFixture {
 protected:
  void SetUp() override {
    PluginFixture::SetUp();
    start_plugin();
    stub_ = v1::Identity::NewStub(make_channel(socket_));
  }
  std::unique_ptr<v1::Identity::Stub> stub_;
};

TEST_F(ClientCallTest, UnaryCallReturnsOkAndResumesOnOurExecutor) {
  asio::io_context io;
  grpc::Status status;
  v1::ProbeResponse response;
  const auto our_thread = std::this_thread::get_id();
  std::thread::id resumed_on;
  run_coro(io, [&]() -> asio::awaitable<void> {
    v1::ProbeRequest request;
    status = co_await unary({.timeout = 5s}, [&](grpc::ClientContext* ctx, UnaryDone done) {
      stub_->async()->Probe(ctx, &request, &response, std::move(done));
    });
    resumed_on = std::this_thread::get_id();
  }());
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(response.ready().value());
  EXPECT_EQ(resumed_on, our_thread);
}

TEST_F(ClientCallTest, HandlerExceptionBecomesInternal) {
  asio::io_context io;
  grpc::Status status;
  run_coro(io, [&]() -> asio::awaitable<void> {
    v1::GetPluginInfoRequest request;
    v1::GetPluginInfoResponse response;
    status = co_await unary({.timeout = 5s}, [&](grpc::ClientContext* ctx, UnaryDone done) {
      stub_->async()->GetPluginInfo(ctx, &request, &response, std::move(done));
    });
  }());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(status.error_message(), "internal error");  // no exception text leaks to clients
}

TEST_F(ClientCallTest, SlowHandlerGivesDeadlineExceededAndIsCancelled) {
  identity_.probe_delay_ms = 20000;
  asio::io_context io;
  grpc::Status status;
  const auto start = std::chrono::steady_clock::now();
  run_coro(io, [&]() -> asio::awaitable<void> {
    v1::ProbeRequest request;
    v1::ProbeResponse response;
    status = co_await unary({.timeout = 200ms}, [&](grpc::ClientContext* ctx, UnaryDone done) {
      stub_->async()->Probe(ctx, &request, &response, std::move(done));
    });
  }());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // The server's OnCancel reached the handler coroutine, which stopped sleeping.
  EXPECT_TRUE(eventually([&] { return identity_.probes_cancelled.load() == 1; }));
}

TEST_F(ClientCallTest, CancellingTheAwaitingCoroutineGivesCancelled) {
  identity_.probe_delay_ms = 20000;
  asio::io_context io;
  asio::cancellation_signal cancel;
  grpc::Status status;
  bool finished = false;
  // Request and response live in the coroutine frame: under ASan this proves gRPC is done with
  // them before the frame goes away.
  asio::co_spawn(io,
                 [&]() -> asio::awaitable<void> {
                   v1::ProbeRequest request;
                   v1::ProbeResponse response;
                   status = co_await unary({.timeout = 30s}, [&](grpc::ClientContext* ctx, UnaryDone done) {
                     stub_->async()->Probe(ctx, &request, &response, std::move(done));
                   });
                 },
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e) {
                   EXPECT_FALSE(e);
                   finished = true;
                 }));
  asio::steady_timer later(io, 100ms);
  later.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  const auto start = std::chrono::steady_clock::now();
  io.run_for(20s);
  ASSERT_TRUE(finished);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(eventually([&] { return identity_.probes_cancelled.load() == 1; }));
}

TEST_F(ClientCallTest, WithTimeoutAroundACallReportsTimeoutAndCancelsIt) {
  identity_.probe_delay_ms = 20000;
  asio::io_context io;
  std::optional<grpc::Status> status{grpc::Status::OK};
  run_coro(io, [&]() -> asio::awaitable<void> {
    v1::ProbeRequest request;
    v1::ProbeResponse response;
    status = co_await async::with_timeout(unary({.timeout = 30s}, [&](grpc::ClientContext* ctx, UnaryDone done) {
                                            stub_->async()->Probe(ctx, &request, &response, std::move(done));
                                          }),
                                          200ms);
  }());
  EXPECT_FALSE(status.has_value());
  EXPECT_TRUE(eventually([&] { return identity_.probes_cancelled.load() == 1; }));
}

TEST_F(ClientCallTest, ManyConcurrentCallsWithHalfCancelled) {
  identity_.probe_delay_ms = 50;
  asio::io_context io;
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  int ok = 0, cancelled = 0, other = 0;
  for (int i = 0; i < 40; ++i) {
    signals.push_back(std::make_unique<asio::cancellation_signal>());
    asio::co_spawn(io,
                   [&]() -> asio::awaitable<void> {
                     v1::ProbeRequest request;
                     v1::ProbeResponse response;
                     auto s = co_await unary({.timeout = 20s}, [&](grpc::ClientContext* ctx, UnaryDone done) {
                       stub_->async()->Probe(ctx, &request, &response, std::move(done));
                     });
                     if (s.ok()) ++ok;
                     else if (s.error_code() == grpc::StatusCode::CANCELLED) ++cancelled;
                     else ++other;
                   },
                   asio::bind_cancellation_slot(signals.back()->slot(), [](std::exception_ptr e) { EXPECT_FALSE(e); }));
  }
  io.poll();
  for (int i = 0; i < 40; i += 2) signals[i]->emit(asio::cancellation_type::terminal);
  io.run_for(30s);
  EXPECT_EQ(ok + cancelled + other, 40);
  EXPECT_EQ(other, 0);
  EXPECT_GE(ok, 20);  // the uncancelled half
}

TEST_F(ClientCallTest, WaitConnectedSucceedsForLiveSocketAndTimesOutForMissingOne) {
  asio::io_context io;
  bool live = false;
  bool missing = true;
  const auto start = std::chrono::steady_clock::now();
  run_coro(io, [&]() -> asio::awaitable<void> {
    live = co_await wait_connected(make_channel(socket_), 5s);
    missing = co_await wait_connected(make_channel(dir_ + "/nobody-home.sock"), 300ms);
  }());
  EXPECT_TRUE(live);
  EXPECT_FALSE(missing);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(Channel, NormalizesEndpoints) {
  EXPECT_EQ(normalize_target("/run/csi.sock"), "unix:///run/csi.sock");
  EXPECT_EQ(normalize_target("unix:///run/csi.sock"), "unix:///run/csi.sock");
  EXPECT_EQ(normalize_target("unix:/run/csi.sock"), "unix:/run/csi.sock");
  EXPECT_EQ(normalize_target("127.0.0.1:4701"), "127.0.0.1:4701");
  EXPECT_TRUE(is_unix_target("unix:/x"));
  EXPECT_FALSE(is_unix_target("localhost:1"));
}

}  // namespace mooring::rpc
