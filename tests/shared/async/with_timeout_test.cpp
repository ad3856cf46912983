#include "shared/async/with_timeout.hpp"

#include "shared/async/sleep.hpp"
#include "tests/shared/async/run_coro.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <gtest/gtest.h>

#include <stdexcept>

namespace mooring::async {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
asio::awaitable<int> answer_after(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
  co_return 42;
}

asio::awaitable<void> fail_after(std::chrono::milliseconds d) {
  co_await sleep_for(d);
  throw std::runtime_error("plugin exploded");
}
}  // namespace

TEST(WithTimeout, ReturnsTheValueWhenTheOpIsFast) {
  asio::io_context io;
  std::optional<int> got;
  run_coro(io, [&]() -> asio::awaitable<void> { got = co_await with_timeout(answer_after(1ms), 10s); }());
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 42);
}

TEST(WithTimeout, TimesOutAndCancelsTheSlowOp) {
  asio::io_context io;
  std::optional<int> got{7};
  bool op_finished = false;
  const auto start = std::chrono::steady_clock::now();
  run_coro(io, [&]() -> asio::awaitable<void> {
    got = co_await with_timeout(
        [&]() -> asio::awaitable<int> {
          auto v = co_await answer_after(std::chrono::hours(1));
          op_finished = true;
          co_return v;
        }(),
        50ms);
  }());
  EXPECT_FALSE(got.has_value());
  EXPECT_FALSE(op_finished);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(WithTimeout, PropagatesTheOpsException) {
  asio::io_context io;
  EXPECT_THROW(run_coro(io, [&]() -> asio::awaitable<void> {
    co_await with_timeout(fail_after(1ms), 10s);
  }()), std::runtime_error);
}

TEST(WithTimeout, VoidOpReportsWhetherItFinished) {
  asio::io_context io;
  bool fast = false;
  bool slow = true;
  run_coro(io, [&]() -> asio::awaitable<void> {
    fast = co_await with_timeout([]() -> asio::awaitable<void> { co_await answer_after(1ms); }(), 10s);
    slow = co_await with_timeout([]() -> asio::awaitable<void> { co_await answer_after(std::chrono::hours(1)); }(), 20ms);
  }());
  EXPECT_TRUE(fast);
  EXPECT_FALSE(slow);
}

TEST(WithTimeout, TimeoutWinsOverAValueReportedAfterCancellation) {
  asio::io_context io;
  std::optional<int> got{7};
  bool op_saw_cancel = false;
  run_coro(io, [&]() -> asio::awaitable<void> {
    got = co_await with_timeout(
        [&]() -> asio::awaitable<int> {
          // Like rpc::unary: cancellation is turned into a value instead of an exception.
          if (co_await sleep_for(std::chrono::hours(1)) == SleepEnd::cancelled) op_saw_cancel = true;
          co_return -1;
        }(),
        30ms);
  }());
  EXPECT_TRUE(op_saw_cancel);
  EXPECT_FALSE(got.has_value());
}

TEST(WithTimeout, CallerCancellationCancelsTheOp) {
  asio::io_context io;
  asio::cancellation_signal cancel;
  std::exception_ptr error;
  bool finished = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> { co_await with_timeout(answer_after(std::chrono::hours(1)), std::chrono::hours(1)); },
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e) {
                   error = e;
                   finished = true;
                 }));
  io.poll();
  cancel.emit(asio::cancellation_type::terminal);
  io.run_for(10s);
  ASSERT_TRUE(finished);
  ASSERT_TRUE(error);
  try {
    std::rethrow_exception(error);
  } catch (const boost::system::system_error& e) {
    EXPECT_EQ(e.code(), asio::error::operation_aborted);
  }
}

}  // namespace mooring::async
