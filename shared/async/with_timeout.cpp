#include "shared/async/with_timeout.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

namespace mooring::async {

namespace asio = boost::asio;

namespace {
bool is_operation_aborted(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& err) {
    return err.code() == asio::error::operation_aborted;
  } catch (...) {
    return false;
  }
}
}  // namespace

asio::awaitable<bool> with_timeout(asio::awaitable<void> op, std::chrono::steady_clock::duration timeout) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, timeout);
  // Both branches are always complete when the group completes: the loser has been cancelled
  // and has finished, so `op` cannot outlive this frame.
  auto [order, op_error, timer_ec] =
      co_await asio::experimental::make_parallel_group(asio::co_spawn(ex, std::move(op), asio::deferred),
                                                       timer.async_wait(asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);

  const auto state = co_await asio::this_coro::cancellation_state;
  const bool we_were_cancelled = state.cancelled() != asio::cancellation_type::none;

  if (order[0] == 0 || we_were_cancelled) {
    // The op finished first, or our caller cancelled us: report exactly what the op did.
    if (op_error) std::rethrow_exception(op_error);
    co_return true;
  }
  // Timer first: a timeout, even if the cancelled op then produced a value (rpc::unary reports
  // CANCELLED). operation_aborted is the expected result of our cancel; any other exception is a
  // real failure of the op.
  (void)timer_ec;
  if (op_error && !is_operation_aborted(op_error)) std::rethrow_exception(op_error);
  co_return false;
}

}  // namespace mooring::async
