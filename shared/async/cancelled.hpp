// Reading a coroutine's cancellation state without awaiting anything: after cancellation every
// co_await of an operation or awaitable throws (throw_if_cancelled), so loops that report
// cancellation as a value test `is_cancelled(co_await this_coro::cancellation_state)` instead.
#pragma once

#include <boost/asio/cancellation_state.hpp>

namespace mooring::async {

inline bool is_cancelled(const boost::asio::cancellation_state& state) {
  return state.cancelled() != boost::asio::cancellation_type::none;
}

}  // namespace mooring::async
