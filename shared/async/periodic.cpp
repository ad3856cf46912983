#include "shared/async/periodic.hpp"

#include "shared/async/backoff.hpp"
#include "shared/async/cancelled.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"

#include <boost/asio/this_coro.hpp>
#include "shared/log/log.hpp"

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cmath>

namespace mooring::async {

namespace asio = boost::asio;

std::chrono::milliseconds periodic_delay(std::chrono::milliseconds period, double jitter, double uniform) {
  const double j = std::clamp(jitter, 0.0, 1.0);
  const double u = std::clamp(uniform, 0.0, 1.0);
  const double ms = static_cast<double>(period.count()) * (1.0 - j + 2.0 * j * u);
  return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(std::llround(std::max(ms, 0.0))));
}

asio::awaitable<void> periodic(std::function<asio::awaitable<void>()> fn, PeriodicOptions options) {
  const log::Logger log{"periodic"};
  bool run = options.run_immediately;
  for (;;) {
    if (is_cancelled(co_await asio::this_coro::cancellation_state)) co_return;
    // Taken before the run so a "run now" that arrives during it is honoured afterwards.
    const std::uint64_t since = options.run_now ? options.run_now->generation() : 0;
    if (run) {
      try {
        co_await fn();
      } catch (const boost::system::system_error& e) {
        if (e.code() != asio::error::operation_aborted) {
          log.error("periodic run failed", {{"name", options.name}, {"error", e.what()}});
        }
      } catch (const std::exception& e) {
        log.error("periodic run failed", {{"name", options.name}, {"error", e.what()}});
      }
    }
    run = true;
    if (is_cancelled(co_await asio::this_coro::cancellation_state)) co_return;
    const auto delay = periodic_delay(options.period, options.jitter, uniform_random());
    if (co_await sleep_for(delay, options.run_now, since) == SleepEnd::cancelled) co_return;
  }
}

}  // namespace mooring::async
