// Run an awaitable with a deadline. Built on parallel_group + wait_for_one rather than
// `op || timer` (asio issue #900: `||` swallows the op's exception). On timeout the op is
// cancelled and awaited before this returns, so nothing it references is used afterwards.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>
#include <utility>

namespace mooring::async {

// True if `op` finished first, false if the deadline passed first (the op was then cancelled and
// awaited; whatever value it produced after that is discarded, and an op that ignores
// cancellation delays the return). An exception from `op` propagates, except the
// operation_aborted it throws because we cancelled it on timeout. If the awaiting coroutine is
// cancelled, the op is cancelled and its outcome (value, or usually operation_aborted) is
// what this returns or throws.
boost::asio::awaitable<bool> with_timeout(boost::asio::awaitable<void> op, std::chrono::steady_clock::duration timeout);

namespace detail {
template <class T>
boost::asio::awaitable<void> store_result(boost::asio::awaitable<T> op, std::optional<T>& out) {
  out.emplace(co_await std::move(op));
}
}  // namespace detail

// The value of `op`, or nullopt on timeout (e.g. for an RPC: nullopt, not the CANCELLED status
// that the cancelled call reported).
template <class T>
boost::asio::awaitable<std::optional<T>> with_timeout(boost::asio::awaitable<T> op,
                                                      std::chrono::steady_clock::duration timeout) {
  std::optional<T> out;
  if (!co_await with_timeout(detail::store_result(std::move(op), out), timeout)) out.reset();
  co_return out;
}

}  // namespace mooring::async
