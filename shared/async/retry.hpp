// The retry loop every caller of a flaky dependency uses (CSI plugins, node agents): run an
// attempt, classify it, wait a backoff delay (or less, when woken), stop on final errors, on the
// time budget, and promptly on cancellation. Retry *policy* (what counts as final) stays with
// the caller, usually via csi::classify.
#pragma once

#include "shared/async/backoff.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace mooring::async {

class WakeSignal;

// What one attempt concluded.
enum class Step {
  done,   // success (or an end state that counts as success): stop
  retry,  // not done yet: wait and try again
  stop,   // final error: retrying as-is cannot help
};

struct Attempt {
  Step step = Step::done;
  std::string error;  // why it failed; empty for done

  static Attempt ok() { return {Step::done, {}}; }
  static Attempt again(std::string why) { return {Step::retry, std::move(why)}; }
  static Attempt final_error(std::string why) { return {Step::stop, std::move(why)}; }
};

// How the whole loop ended.
enum class RetryEnd {
  done,       // an attempt returned Step::done
  stopped,    // an attempt returned Step::stop
  exhausted,  // Backoff::max_elapsed would be exceeded by the next attempt
  cancelled,  // the awaiting coroutine was cancelled
};

struct RetryResult {
  RetryEnd end = RetryEnd::done;
  unsigned attempts = 0;   // attempts actually run
  std::string last_error;  // error text of the last failed attempt
  bool ok() const { return end == RetryEnd::done; }
};

// Passed to on_retry after a failed attempt, before sleeping.
struct RetryEvent {
  unsigned attempt;  // 1-based number of the attempt that just failed
  const std::string& error;
  std::chrono::milliseconds delay;
  std::chrono::system_clock::time_point next_attempt;  // wall clock, for APIs ("NextAttempt")
};

struct RetryOptions {
  Backoff backoff;
  // Optional early wake ("plugin became healthy again"): a notify during an attempt or during
  // the sleep starts the next attempt at once. Must outlive the retry.
  WakeSignal* wake = nullptr;
  // Called on the awaiting executor after each failed attempt that will be retried.
  std::function<void(const RetryEvent&)> on_retry;
};

// `attempt(n)` is called with the 1-based attempt number. Exceptions from it propagate (they
// are bugs, or operation_aborted from an operation it awaited while being cancelled).
// Cancellation during the backoff sleep, or noticed between attempts, ends the loop with
// RetryEnd::cancelled. (Awaiting retry() in an already-cancelled coroutine throws
// operation_aborted, like any co_await under Asio's throw_if_cancelled.)
boost::asio::awaitable<RetryResult> retry(std::function<boost::asio::awaitable<Attempt>(unsigned)> attempt,
                                          RetryOptions options);

std::string_view to_string(RetryEnd end);

}  // namespace mooring::async
