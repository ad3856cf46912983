#include "shared/async/backoff.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace mooring::async {

std::chrono::milliseconds Backoff::delay(unsigned attempt, double uniform) const {
  const double initial_ms = static_cast<double>(std::max<std::chrono::milliseconds::rep>(initial.count(), 0));
  const double cap_ms = static_cast<double>(std::max<std::chrono::milliseconds::rep>(max.count(), 0));
  const double mult = std::max(multiplier, 1.0);
  // pow may overflow to inf for large attempts; min() with the cap handles that, and a NaN
  // (from a nonsense configuration) falls back to the cap.
  double base = initial_ms * std::pow(mult, static_cast<double>(attempt));
  if (std::isnan(base) || base > cap_ms) base = cap_ms;
  const double j = std::clamp(jitter, 0.0, 1.0);
  const double u = std::clamp(uniform, 0.0, 1.0);
  const double jittered = base * (1.0 - j * u);
  return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(std::llround(jittered)));
}

std::chrono::milliseconds Backoff::delay(unsigned attempt) const { return delay(attempt, uniform_random()); }

bool Backoff::exhausted(std::chrono::milliseconds elapsed) const {
  return max_elapsed.count() > 0 && elapsed >= max_elapsed;
}

std::optional<std::chrono::milliseconds> Backoff::next_delay(unsigned attempt, std::chrono::milliseconds elapsed,
                                                             double uniform) const {
  const auto d = delay(attempt, uniform);
  if (exhausted(elapsed + d)) return std::nullopt;
  return d;
}

std::optional<std::chrono::milliseconds> Backoff::next_delay(unsigned attempt,
                                                             std::chrono::milliseconds elapsed) const {
  return next_delay(attempt, elapsed, uniform_random());
}

double uniform_random() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace mooring::async
