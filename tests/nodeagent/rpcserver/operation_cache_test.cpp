#include "services/nodeagent/rpcserver/operation_cache.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "tests/shared/async/run_coro.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Source = OperationCache::Source;

bool keep_ok(const grpc::Status& st) { return st.ok(); }

// A plugin stand-in: counts its calls, answers `status` after `delay`.
struct Plugin {
  asio::io_context& io;
  int calls = 0;
  grpc::Status status = grpc::Status::OK;
  std::chrono::milliseconds delay{0};

  OperationCache::Call call(std::string response = "answer") {
    return [this, response]() -> asio::awaitable<OperationAnswer> {
      ++calls;
      if (delay.count() > 0) {
        asio::steady_timer t(io, delay);
        co_await t.async_wait(asio::use_awaitable);
      }
      co_return OperationAnswer{status, status.ok() ? response : std::string{}};
    };
  }
};

TEST(OperationCache, ARepeatOfAFinishedCallIsAnsweredFromItsResultWithoutThePlugin) {
  asio::io_context io;
  OperationCache cache(io.get_executor());
  Plugin plugin{io};
  async::run_coro(io, [&]() -> asio::awaitable<void> {
    auto first = co_await cache.run("op-1", 7, plugin.call("ctx-a"), keep_ok);
    auto second = co_await cache.run("op-1", 7, plugin.call("ctx-b"), keep_ok);
    EXPECT_EQ(first.source, Source::plugin);
    EXPECT_EQ(second.source, Source::cached);
    EXPECT_EQ(second.answer.response, "ctx-a");  // the first call's answer, not a new one
    EXPECT_TRUE(second.answer.status.ok());
  }());
  EXPECT_EQ(plugin.calls, 1);
  EXPECT_EQ(cache.kept(), 1u);
}

TEST(OperationCache, ARepeatWhileTheCallIsInFlightJoinsIt) {
  asio::io_context io;
  OperationCache cache(io.get_executor());
  Plugin plugin{io};
  plugin.delay = 100ms;
  std::vector<Source> sources;
  auto caller = [&]() -> asio::awaitable<void> {
    auto r = co_await cache.run("op-1", 7, plugin.call(), keep_ok);
    EXPECT_TRUE(r.answer.status.ok());
    sources.push_back(r.source);
  };
  asio::co_spawn(io, caller(), asio::detached);
  asio::co_spawn(io, caller(), asio::detached);
  asio::co_spawn(io, caller(), asio::detached);
  io.run_for(5s);
  EXPECT_EQ(plugin.calls, 1);
  ASSERT_EQ(sources.size(), 3u);
  EXPECT_EQ(std::count(sources.begin(), sources.end(), Source::plugin), 1);
  EXPECT_EQ(std::count(sources.begin(), sources.end(), Source::joined), 2);
}

TEST(OperationCache, ACallerThatGoesAwayDoesNotCancelTheCallAndItsRepeatGetsTheResult) {
  // The old leader's call is cut when it dies; the plugin call goes on, and the new leader's
  // resend is answered with its result.
  asio::io_context io;
  OperationCache cache(io.get_executor());
  Plugin plugin{io};
  plugin.delay = 100ms;
  asio::cancellation_signal cut;
  bool first_cancelled = false;
  asio::co_spawn(io, cache.run("op-1", 7, plugin.call("ctx"), keep_ok),
                 asio::bind_cancellation_slot(cut.slot(), [&](std::exception_ptr e, OperationCache::Result) {
                   first_cancelled = e != nullptr;
                 }));
  asio::steady_timer at(io, 20ms);
  at.async_wait([&](auto) { cut.emit(asio::cancellation_type::terminal); });
  io.run_for(300ms);
  io.restart();
  EXPECT_TRUE(first_cancelled);
  async::run_coro(io, [&]() -> asio::awaitable<void> {
    auto again = co_await cache.run("op-1", 7, plugin.call("other"), keep_ok);
    EXPECT_EQ(again.source, Source::cached);
    EXPECT_EQ(again.answer.response, "ctx");
  }());
  EXPECT_EQ(plugin.calls, 1);
}

TEST(OperationCache, AnAnswerThatIsNotKeptIsAskedAgainOnRepeat) {
  asio::io_context io;
  OperationCache cache(io.get_executor());
  Plugin plugin{io};
  plugin.status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow");
  async::run_coro(io, [&]() -> asio::awaitable<void> {
    auto first = co_await cache.run("op-1", 7, plugin.call(), keep_ok);
    EXPECT_EQ(first.answer.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    plugin.status = grpc::Status::OK;
    auto second = co_await cache.run("op-1", 7, plugin.call(), keep_ok);
    EXPECT_EQ(second.source, Source::plugin);
    EXPECT_TRUE(second.answer.status.ok());
  }());
  EXPECT_EQ(plugin.calls, 2);
}

TEST(OperationCache, OtherIdsAndTheSameIdForAnotherRequestReachThePlugin) {
  asio::io_context io;
  OperationCache cache(io.get_executor());
  Plugin plugin{io};
  async::run_coro(io, [&]() -> asio::awaitable<void> {
    co_await cache.run("op-1", 7, plugin.call(), keep_ok);
    auto other = co_await cache.run("op-2", 7, plugin.call(), keep_ok);
    EXPECT_EQ(other.source, Source::plugin);
    auto changed = co_await cache.run("op-1", 8, plugin.call("changed"), keep_ok);  // a different request
    EXPECT_EQ(changed.source, Source::plugin);
    EXPECT_EQ(changed.answer.response, "changed");
  }());
  EXPECT_EQ(plugin.calls, 3);
}

TEST(OperationCache, KeptResultsExpireAndTheOldestGoFirstBeyondTheLimit) {
  asio::io_context io;
  OperationCache cache(io.get_executor(), OperationCacheOptions{.ttl = 50ms, .max_entries = 3});
  Plugin plugin{io};
  async::run_coro(io, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 5; ++i) co_await cache.run("op-" + std::to_string(i), 1, plugin.call(), keep_ok);
    EXPECT_EQ(cache.kept(), 3u);
    auto newest = co_await cache.run("op-4", 1, plugin.call(), keep_ok);
    EXPECT_EQ(newest.source, Source::cached);
    auto oldest = co_await cache.run("op-0", 1, plugin.call(), keep_ok);
    EXPECT_EQ(oldest.source, Source::plugin);  // evicted
    asio::steady_timer t(io, 80ms);
    co_await t.async_wait(asio::use_awaitable);
    auto expired = co_await cache.run("op-4", 1, plugin.call(), keep_ok);
    EXPECT_EQ(expired.source, Source::plugin);
  }());
  EXPECT_EQ(plugin.calls, 7);
}

TEST(OperationCache, TenThousandPublishResultsHoldAFewMegabytes) {
  // The default bound, filled with results shaped like the control plane's publishes: an id of
  // ~90 characters and a publish context of two short entries (~60 bytes serialized).
  asio::io_context io;
  OperationCache cache(io.get_executor());
  Plugin plugin{io};
  const std::string context(60, 'c');
  async::run_coro(io, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 10'000; ++i)
      co_await cache.run("hostpath ControllerPublishVolume default/volume-" + std::to_string(i) +
                             " 0b7d3f0e-6c1a-4f0e-9a53-5e6c2b7f" + std::to_string(100000 + i) + " 1795000000000",
                         1, plugin.call(context), keep_ok);
  }());
  EXPECT_EQ(cache.kept(), 10'000u);
  std::cerr << "operation cache: " << cache.kept() << " kept results, ~" << cache.kept_bytes() / 1024 << " KiB\n";
  EXPECT_LT(cache.kept_bytes(), 8u * 1024 * 1024);
}

TEST(OperationCache, AfterShutdownACallIsRefusedAsUnavailable) {
  asio::io_context io;
  OperationCache cache(io.get_executor());
  Plugin plugin{io};
  async::run_coro(io, [&]() -> asio::awaitable<void> {
    co_await cache.shutdown();
    auto r = co_await cache.run("op-1", 1, plugin.call(), keep_ok);
    EXPECT_EQ(r.answer.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  }());
  EXPECT_EQ(plugin.calls, 0);
}

}  // namespace
}  // namespace mooring::nodeagent
