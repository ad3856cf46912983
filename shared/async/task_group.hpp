// Every background coroutine belongs to a TaskGroup: spawned with a name and its own
// cancellation signal, its exception logged with that name, and cancelled and joined on
// shutdown (models: Beast's server-flex-awaitable task_group, userver's BackgroundTaskStorage).
// Make the group the *last* member of its owner, so it is destroyed (and cancels) first.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace mooring::async {

// Not thread-safe: use from one single-threaded io_context (or strand); the children run on
// the group's executor.
class TaskGroup {
 public:
  TaskGroup(boost::asio::any_io_executor executor, std::string name);
  // Cancels the children that are still running; they finish on their own afterwards (their
  // bookkeeping is shared, not owned by this object). Prefer cancel() + co_await join().
  ~TaskGroup();
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Starts `task` as a child named `name`. A child that throws is logged (error level, with the
  // task and group names) and does not affect its siblings; a child that ends by
  // operation_aborted after cancellation is logged at debug. Returns false (and drops the task
  // without running it) once cancel() has been called.
  bool spawn(std::string name, boost::asio::awaitable<void> task);
  // The same for a function that makes the coroutine; the function object is kept alive until
  // the coroutine ends, so a capturing lambda coroutine is safe here (it is not as an awaitable:
  // `spawn("x", [&]() -> awaitable<void> {...}())` leaves the closure dangling).
  bool spawn(std::string name, std::function<boost::asio::awaitable<void>()> make_task);

  // Emits terminal cancellation to every running child. Permanent: later spawns are refused.
  void cancel();
  bool cancelled() const;

  // Completes when no child is running (immediately if none). Cancelling the awaiting
  // coroutine throws operation_aborted; the children keep running.
  boost::asio::awaitable<void> join();
  // Like join(), but gives up after `timeout`: true if every child finished.
  boost::asio::awaitable<bool> join_for(std::chrono::steady_clock::duration timeout);

  // Children still running.
  std::size_t size() const;
  const boost::asio::any_io_executor& executor() const { return executor_; }

 private:
  struct State;
  boost::asio::any_io_executor executor_;
  std::shared_ptr<State> state_;
};

}  // namespace mooring::async
