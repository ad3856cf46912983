#include "services/controlplane/ha/lease_hold.hpp"

#include <chrono>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include "services/controlplane/ha/lease_state.hpp"
#include "shared/async/sleep.hpp"

namespace mooring::controlplane::ha {

LeaseHold::LeaseHold(boost::asio::any_io_executor executor, const LeaseState& lease, std::function<bool()> writable)
    : lease_(lease), writable_(std::move(writable)), changed_(std::move(executor)) {}

boost::asio::awaitable<bool> LeaseHold::wait_while_unconfirmed() {
  if (!lease_.unconfirmed()) co_return true;
  // Entered only while the lease is unconfirmed, so this ends within one lease.
  const auto until = lease_.writes_held_until();
  for (;;) {
    // The generation is read with the state, in one executor turn: a wake() after this wakes us.
    const auto seen = changed_.generation();
    const auto now = std::chrono::steady_clock::now();
    if (now >= until || !lease_.leading() || (lease_.lease_valid() && writable_())) break;
    const auto end = co_await async::sleep_for(until - now, &changed_, seen);
    if (end == async::SleepEnd::cancelled) throw boost::system::system_error(boost::asio::error::operation_aborted);
  }
  co_return !lease_.unconfirmed() && writable_();
}

}  // namespace mooring::controlplane::ha
