#include "shared/async/periodic.hpp"

#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "tests/shared/async/run_coro.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <gtest/gtest.h>

#include <stdexcept>

namespace mooring::async {

namespace asio = boost::asio;
using namespace std::chrono_literals;

TEST(Periodic, RunsRepeatedlySurvivesExceptionsAndStopsOnCancel) {
  asio::io_context io;
  asio::cancellation_signal cancel;
  int runs = 0;
  bool finished = false;
  asio::co_spawn(io,
                 periodic(
                     [&]() -> asio::awaitable<void> {
                       ++runs;
                       if (runs == 2) throw std::runtime_error("one bad run");
                       co_return;
                     },
                     PeriodicOptions{.name = "test", .period = 10ms, .jitter = 0.5}),
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e) {
                   EXPECT_FALSE(e);
                   finished = true;
                 }));
  asio::steady_timer stop(io, 300ms);
  stop.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  io.run_for(20s);
  EXPECT_TRUE(finished);
  EXPECT_GE(runs, 4);
}

TEST(Periodic, RunNowTriggersAnImmediateRun) {
  asio::io_context io;
  WakeSignal run_now(io.get_executor());
  asio::cancellation_signal cancel;
  int runs = 0;
  bool finished = false;
  asio::co_spawn(io,
                 periodic(
                     [&]() -> asio::awaitable<void> {
                       ++runs;
                       co_return;
                     },
                     PeriodicOptions{.name = "fingerprint", .period = std::chrono::hours(1), .run_immediately = false,
                                     .run_now = &run_now}),
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e) {
                   EXPECT_FALSE(e);
                   finished = true;
                 }));
  run_coro(io, [&]() -> asio::awaitable<void> {
    co_await sleep_for(20ms);
    EXPECT_EQ(runs, 0);
    run_now.notify();
    co_await sleep_for(50ms);
    EXPECT_EQ(runs, 1);
    run_now.notify();
    co_await sleep_for(50ms);
    EXPECT_EQ(runs, 2);
    cancel.emit(asio::cancellation_type::terminal);
  }());
  io.restart();
  io.run_for(10s);
  EXPECT_TRUE(finished);
}

}  // namespace mooring::async
