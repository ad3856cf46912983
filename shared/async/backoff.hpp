// The async room: Asio coroutine building blocks every Mooring service uses (backoff, retry,
// timeouts, task groups, periodic loops). This file: exponential backoff as a pure value.
#pragma once

#include <chrono>
#include <optional>

namespace mooring::async {

// Delay before retry number `attempt` (0 = the first retry) is
//   base = min(initial * multiplier^attempt, max)
//   delay in [base * (1 - jitter), base]
// Jitter only shortens the delay, so `max` is a hard cap and retries that failed together do
// not stay in lockstep (and do not pile up at the cap).
struct Backoff {
  std::chrono::milliseconds initial{100};
  std::chrono::milliseconds max{std::chrono::seconds(30)};
  double multiplier = 2.0;
  double jitter = 0.2;                       // fraction in [0, 1]
  std::chrono::milliseconds max_elapsed{0};  // 0 = retry forever

  // `uniform` is a random number in [0, 1); values outside are clamped.
  std::chrono::milliseconds delay(unsigned attempt, double uniform) const;
  // Same, with a thread-local random generator.
  std::chrono::milliseconds delay(unsigned attempt) const;

  // True when the retry budget is spent: no attempt may start at `elapsed`.
  bool exhausted(std::chrono::milliseconds elapsed) const;

  // The delay before retry `attempt`, or nullopt when that retry would start after
  // max_elapsed (measured from the first attempt).
  std::optional<std::chrono::milliseconds> next_delay(unsigned attempt, std::chrono::milliseconds elapsed,
                                                      double uniform) const;
  std::optional<std::chrono::milliseconds> next_delay(unsigned attempt, std::chrono::milliseconds elapsed) const;
};

// A uniform random number in [0, 1) from a thread-local generator (also used for periodic jitter).
double uniform_random();

}  // namespace mooring::async
