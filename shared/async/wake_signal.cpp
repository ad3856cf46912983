#include "shared/async/wake_signal.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

namespace mooring::async {

namespace asio = boost::asio;

struct WakeSignal::Timer {
  explicit Timer(asio::any_io_executor ex) : timer(std::move(ex), asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
};

WakeSignal::WakeSignal(asio::any_io_executor executor) : timer_(std::make_unique<Timer>(std::move(executor))) {}

WakeSignal::~WakeSignal() = default;

void WakeSignal::notify() {
  ++generation_;
  // The expiry stays at max(): cancel() completes the waits pending now, later waits block again.
  timer_->timer.cancel();
}

asio::awaitable<std::uint64_t> WakeSignal::wait(std::uint64_t since) {
  while (generation_ == since) {
    // The timer never expires; it completes only through notify() or cancellation.
    auto [ec] = co_await timer_->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
    auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      throw boost::system::system_error(asio::error::operation_aborted, "wake signal wait cancelled");
    }
  }
  co_return generation_;
}

}  // namespace mooring::async
