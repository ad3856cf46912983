#include "shared/async/retry.hpp"

#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "tests/shared/async/run_coro.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace mooring::async {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
Backoff fast() { return Backoff{.initial = 1ms, .max = 5ms, .multiplier = 2.0, .jitter = 0.0}; }
Backoff glacial() { return Backoff{.initial = std::chrono::hours(1), .max = std::chrono::hours(1), .jitter = 0.0}; }
}  // namespace

TEST(Retry, StopsOnFinalErrorWithoutFurtherAttempts) {
  asio::io_context io;
  RetryResult result;
  std::vector<unsigned> retried;
  run_coro(io, [&]() -> asio::awaitable<void> {
    result = co_await retry(
        [](unsigned n) -> asio::awaitable<Attempt> {
          if (n < 3) co_return Attempt::again("busy " + std::to_string(n));
          co_return Attempt::final_error("invalid argument");
        },
        RetryOptions{.backoff = fast(), .on_retry = [&](const RetryEvent& e) { retried.push_back(e.attempt); }});
  }());
  EXPECT_EQ(result.end, RetryEnd::stopped);
  EXPECT_EQ(result.attempts, 3u);
  EXPECT_EQ(result.last_error, "invalid argument");
  EXPECT_EQ(retried, (std::vector<unsigned>{1, 2}));
}

TEST(Retry, SucceedsAfterRetriesAndReportsNextAttempt) {
  asio::io_context io;
  RetryResult result;
  std::vector<std::string> errors;
  run_coro(io, [&]() -> asio::awaitable<void> {
    result = co_await retry(
        [](unsigned n) -> asio::awaitable<Attempt> {
          co_return n < 4 ? Attempt::again("unavailable") : Attempt::ok();
        },
        RetryOptions{.backoff = fast(), .on_retry = [&](const RetryEvent& e) {
                       errors.push_back(e.error);
                       EXPECT_GT(e.next_attempt, std::chrono::system_clock::now() - 1s);
                       EXPECT_LE(e.delay, 5ms);
                     }});
  }());
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.attempts, 4u);
  EXPECT_EQ(errors.size(), 3u);
}

TEST(Retry, CancellationInterruptsTheBackoffSleep) {
  asio::io_context io;
  asio::cancellation_signal signal;
  RetryResult result;
  bool finished = false;
  asio::co_spawn(io,
                 retry([](unsigned) -> asio::awaitable<Attempt> { co_return Attempt::again("down"); },
                       RetryOptions{.backoff = glacial()}),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, RetryResult r) {
                   EXPECT_FALSE(e);
                   result = r;
                   finished = true;
                 }));
  asio::steady_timer later(io, 50ms);
  later.async_wait([&](boost::system::error_code) { signal.emit(asio::cancellation_type::terminal); });
  const auto start = Clock::now();
  io.run_for(20s);
  ASSERT_TRUE(finished);
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_EQ(result.end, RetryEnd::cancelled);
  EXPECT_EQ(result.attempts, 1u);
  EXPECT_EQ(result.last_error, "down");
}

TEST(Retry, WakeSignalStartsTheNextAttemptEarly) {
  asio::io_context io;
  WakeSignal healthy(io.get_executor());
  RetryResult result;
  run_coro(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer later(io, 50ms);
    later.async_wait([&](boost::system::error_code) { healthy.notify(); });
    result = co_await retry(
        [](unsigned n) -> asio::awaitable<Attempt> {
          co_return n == 1 ? Attempt::again("unhealthy") : Attempt::ok();
        },
        RetryOptions{.backoff = glacial(), .wake = &healthy});
  }(), 20s);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.attempts, 2u);
}

TEST(Retry, WakeDuringAnAttemptIsNotLost) {
  asio::io_context io;
  WakeSignal healthy(io.get_executor());
  RetryResult result;
  run_coro(io, [&]() -> asio::awaitable<void> {
    result = co_await retry(
        [&](unsigned n) -> asio::awaitable<Attempt> {
          if (n == 1) {
            healthy.notify();  // arrives after retry read the generation, before it sleeps
            co_return Attempt::again("unhealthy");
          }
          co_return Attempt::ok();
        },
        RetryOptions{.backoff = glacial(), .wake = &healthy});
  }(), 20s);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.attempts, 2u);
}

TEST(Retry, GivesUpWhenMaxElapsedWouldBeExceeded) {
  asio::io_context io;
  RetryResult result;
  run_coro(io, [&]() -> asio::awaitable<void> {
    result = co_await retry([](unsigned) -> asio::awaitable<Attempt> { co_return Attempt::again("timeout"); },
                            RetryOptions{.backoff = Backoff{.initial = 100ms, .max = 10s, .multiplier = 2.0,
                                                            .jitter = 0.0, .max_elapsed = 250ms}});
  }());
  EXPECT_EQ(result.end, RetryEnd::exhausted);
  EXPECT_EQ(result.attempts, 2u);  // t=0, t=100ms; the next would start at 300ms
  EXPECT_EQ(result.last_error, "timeout");
}

TEST(WakeSignal, NotifyWakesAllCurrentWaiters) {
  asio::io_context io;
  WakeSignal signal(io.get_executor());
  int woken = 0;
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      const auto g = co_await signal.wait(0);
      EXPECT_EQ(g, 1u);
      ++woken;
    }, [](std::exception_ptr e) { EXPECT_FALSE(e); });
  }
  io.poll();
  EXPECT_EQ(woken, 0);
  signal.notify();
  io.run_for(5s);
  EXPECT_EQ(woken, 3);
}

TEST(SleepFor, ReportsElapsedWokenAndCancelled) {
  asio::io_context io;
  WakeSignal signal(io.get_executor());
  run_coro(io, [&]() -> asio::awaitable<void> {
    EXPECT_EQ(co_await sleep_for(1ms), SleepEnd::elapsed);
    EXPECT_EQ(co_await sleep_for(1ms, &signal, signal.generation()), SleepEnd::elapsed);
    signal.notify();
    EXPECT_EQ(co_await sleep_for(1h, &signal, 0), SleepEnd::woken);
  }());

  asio::cancellation_signal cancel;
  SleepEnd end = SleepEnd::elapsed;
  asio::co_spawn(io, sleep_for(1h, &signal, signal.generation()),
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, SleepEnd r) {
                   EXPECT_FALSE(e);
                   end = r;
                 }));
  io.restart();
  io.poll();
  cancel.emit(asio::cancellation_type::terminal);
  io.run_for(5s);
  EXPECT_EQ(end, SleepEnd::cancelled);
}

}  // namespace mooring::async
