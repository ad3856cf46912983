#include "shared/async/sleep.hpp"

#include "shared/async/cancelled.hpp"
#include "shared/async/wake_signal.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace mooring::async {

namespace asio = boost::asio;

asio::awaitable<SleepEnd> sleep_for(std::chrono::steady_clock::duration duration, WakeSignal* wake,
                                    std::uint64_t since) {
  if (is_cancelled(co_await asio::this_coro::cancellation_state)) co_return SleepEnd::cancelled;
  if (wake && wake->generation() != since) co_return SleepEnd::woken;

  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, duration);
  if (!wake) {
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
    co_return is_cancelled(co_await asio::this_coro::cancellation_state) ? SleepEnd::cancelled : SleepEnd::elapsed;
  }

  // Whichever finishes first cancels the other; the group forwards our own cancellation to both.
  auto [order, timer_ec, wake_error, generation] =
      co_await asio::experimental::make_parallel_group(timer.async_wait(asio::deferred),
                                                       asio::co_spawn(ex, wake->wait(since), asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  (void)timer_ec;
  (void)wake_error;  // the losing wait ends with operation_aborted
  (void)generation;
  if (is_cancelled(co_await asio::this_coro::cancellation_state)) co_return SleepEnd::cancelled;
  co_return order[0] == 0 ? SleepEnd::elapsed : SleepEnd::woken;
}

}  // namespace mooring::async
