// A periodic loop (userver PeriodicTask): run a function every period with jitter, run it at
// once when a WakeSignal fires ("run now"), stop on cancellation.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace mooring::async {

class WakeSignal;

struct PeriodicOptions {
  std::string name;  // for logs
  std::chrono::milliseconds period{std::chrono::seconds(30)};
  double jitter = 0.1;            // each sleep is period * [1 - jitter, 1 + jitter]
  bool run_immediately = true;    // first run before the first sleep
  WakeSignal* run_now = nullptr;  // optional; a notify (even during a run) triggers one more run
};

// Runs until the awaiting coroutine is cancelled, then returns normally. An exception from one
// run (other than cancellation) is logged with the loop's name and the loop continues: one bad
// fingerprint must not end health checking.
boost::asio::awaitable<void> periodic(std::function<boost::asio::awaitable<void>()> fn, PeriodicOptions options);

// The sleep before the next run, for `uniform` in [0, 1): period * (1 - jitter + 2 * jitter * uniform).
std::chrono::milliseconds periodic_delay(std::chrono::milliseconds period, double jitter, double uniform);

}  // namespace mooring::async
