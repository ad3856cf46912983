// A timer used as a condition variable (Asio chat_server): notify() wakes every current waiter.
// A generation counter makes the check-then-wait race harmless: read generation(), check your
// condition, then wait(that generation); a notify in between makes wait() return at once.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>

namespace mooring::async {

// Not thread-safe: use from the executor it was created with (single-threaded io_context or strand).
class WakeSignal {
 public:
  explicit WakeSignal(boost::asio::any_io_executor executor);
  ~WakeSignal();
  WakeSignal(const WakeSignal&) = delete;
  WakeSignal& operator=(const WakeSignal&) = delete;

  std::uint64_t generation() const { return generation_; }

  // Bumps the generation and wakes all waiters.
  void notify();

  // Returns the current generation once it differs from `since` (immediately if it already does).
  // Throws system_error(operation_aborted) when the awaiting coroutine is cancelled.
  boost::asio::awaitable<std::uint64_t> wait(std::uint64_t since);

 private:
  struct Timer;
  std::unique_ptr<Timer> timer_;
  std::uint64_t generation_ = 0;
};

}  // namespace mooring::async
