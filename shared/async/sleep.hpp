// A cancellable sleep that a WakeSignal can cut short: the wait between retries and between
// periodic runs. Cancellation is a value here, so loops can exit cleanly.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>

namespace mooring::async {

class WakeSignal;

enum class SleepEnd { elapsed, woken, cancelled };

// Sleeps for `duration`; returns early with `woken` once `wake` (if given) moves past generation
// `since`, and with `cancelled` when the awaiting coroutine is cancelled during the sleep.
// Note Asio's throw_if_cancelled: in a coroutine that is *already* cancelled, every co_await of an
// operation or awaitable (this one included) throws operation_aborted before it starts. Loops
// that want cancellation as a value check `co_await this_coro::cancellation_state` first, as
// retry() and periodic() do.
boost::asio::awaitable<SleepEnd> sleep_for(std::chrono::steady_clock::duration duration, WakeSignal* wake = nullptr,
                                           std::uint64_t since = 0);

}  // namespace mooring::async
