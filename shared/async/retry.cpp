#include "shared/async/retry.hpp"

#include "shared/async/cancelled.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"

#include <boost/asio/this_coro.hpp>

namespace mooring::async {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

asio::awaitable<RetryResult> retry(std::function<asio::awaitable<Attempt>(unsigned)> attempt, RetryOptions options) {
  RetryResult result;
  const auto started = steady_clock::now();
  for (;;) {
    if (is_cancelled(co_await asio::this_coro::cancellation_state)) {
      result.end = RetryEnd::cancelled;
      co_return result;
    }
    // Taken before the attempt, so a wake that arrives while it runs is not lost.
    const std::uint64_t since = options.wake ? options.wake->generation() : 0;
    ++result.attempts;
    Attempt outcome = co_await attempt(result.attempts);
    switch (outcome.step) {
      case Step::done: result.end = RetryEnd::done; co_return result;
      case Step::stop:
        result.end = RetryEnd::stopped;
        result.last_error = std::move(outcome.error);
        co_return result;
      case Step::retry: result.last_error = std::move(outcome.error); break;
    }
    // An attempt that failed because we were cancelled must not be reported as a retry.
    if (is_cancelled(co_await asio::this_coro::cancellation_state)) {
      result.end = RetryEnd::cancelled;
      co_return result;
    }
    const auto elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - started);
    const auto delay = options.backoff.next_delay(result.attempts - 1, elapsed);
    if (!delay) {
      result.end = RetryEnd::exhausted;
      co_return result;
    }
    if (options.on_retry) {
      options.on_retry(
          RetryEvent{result.attempts, result.last_error, *delay, std::chrono::system_clock::now() + *delay});
    }
    if (co_await sleep_for(*delay, options.wake, since) == SleepEnd::cancelled) {
      result.end = RetryEnd::cancelled;
      co_return result;
    }
  }
}

std::string_view to_string(RetryEnd end) {
  switch (end) {
    case RetryEnd::done: return "done";
    case RetryEnd::stopped: return "stopped";
    case RetryEnd::exhausted: return "exhausted";
    case RetryEnd::cancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace mooring::async
