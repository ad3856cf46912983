#include "shared/async/keyed_locks.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mooring::async {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

TEST(KeyedLocksTest, SameVolumeIsFifoAndOtherVolumesDoNotWait) {
  asio::io_context io;
  KeyedLocks locks(io.get_executor());
  std::vector<std::string> order;
  auto worker = [&](std::string volume, std::string name) -> asio::awaitable<void> {
    auto guard = co_await locks.lock(volume);
    order.push_back(name + "+");
    asio::steady_timer t(io, 20ms);
    co_await t.async_wait(asio::use_awaitable);
    order.push_back(name + "-");
  };
  for (auto name : {"a1", "a2", "a3"}) asio::co_spawn(io, worker("vol-a", name), asio::detached);
  asio::co_spawn(io, worker("vol-b", "b1"), asio::detached);
  io.run_for(5s);
  // Per volume: strictly one holder at a time, in arrival order.
  std::vector<std::string> a;
  for (const auto& e : order) {
    if (e[0] == 'a') a.push_back(e);
  }
  const std::vector<std::string> expected_a{"a1+", "a1-", "a2+", "a2-", "a3+", "a3-"};
  EXPECT_EQ(a, expected_a);
  // Another volume does not queue behind vol-a.
  EXPECT_EQ(order[1], "b1+");
  EXPECT_FALSE(locks.locked("vol-a"));
}

TEST(KeyedLocksTest, CancelledWaiterLeavesTheQueueAndTheNextOneGetsTheLock) {
  asio::io_context io;
  KeyedLocks locks(io.get_executor());
  std::vector<std::string> events;
  asio::cancellation_signal cancel;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    auto guard = co_await locks.lock("v");
    asio::steady_timer t(io, 50ms);
    co_await t.async_wait(asio::use_awaitable);
    events.push_back("first done");
  }, asio::detached);
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    auto guard = co_await locks.lock("v");
    events.push_back("cancelled one got the lock");
  }, asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e) {
    events.push_back(e ? "cancelled" : "not cancelled");
  }));
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    auto guard = co_await locks.lock("v");
    events.push_back("third got the lock");
  }, asio::detached);
  asio::steady_timer t(io, 10ms);
  t.async_wait([&](boost::system::error_code) {
    EXPECT_EQ(locks.waiting("v"), 2u);
    cancel.emit(asio::cancellation_type::terminal);
  });
  io.run_for(5s);
  const std::vector<std::string> expected{"cancelled", "first done", "third got the lock"};
  EXPECT_EQ(events, expected);
  EXPECT_FALSE(locks.locked("v"));
  EXPECT_EQ(locks.waiting("v"), 0u);
}

}  // namespace
}  // namespace mooring::async
