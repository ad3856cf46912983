#include "shared/async/backoff.hpp"
#include "shared/async/periodic.hpp"

#include <gtest/gtest.h>

namespace mooring::async {

using namespace std::chrono_literals;

TEST(Backoff, GrowsGeometricallyWithoutJitter) {
  Backoff b{.initial = 100ms, .max = 10s, .multiplier = 2.0, .jitter = 0.0};
  EXPECT_EQ(b.delay(0, 0.5), 100ms);
  EXPECT_EQ(b.delay(1, 0.5), 200ms);
  EXPECT_EQ(b.delay(2, 0.5), 400ms);
  EXPECT_EQ(b.delay(5, 0.5), 3200ms);
}

TEST(Backoff, IsCappedAtMaxEvenForHugeAttempts) {
  Backoff b{.initial = 100ms, .max = 5s, .multiplier = 3.0, .jitter = 0.0};
  EXPECT_EQ(b.delay(10, 0.0), 5s);
  EXPECT_EQ(b.delay(100000, 0.0), 5s);  // pow overflows to inf
}

TEST(Backoff, JitterOnlyShortensWithinFraction) {
  Backoff b{.initial = 1000ms, .max = 10s, .multiplier = 2.0, .jitter = 0.25};
  EXPECT_EQ(b.delay(0, 0.0), 1000ms);
  EXPECT_EQ(b.delay(0, 1.0), 750ms);
  EXPECT_EQ(b.delay(0, 0.5), 875ms);
  // At the cap, jitter still spreads below it and never above.
  EXPECT_EQ(b.delay(20, 0.0), 10s);
  EXPECT_EQ(b.delay(20, 1.0), 7500ms);
  for (int i = 0; i < 1000; ++i) {
    const auto d = b.delay(3);
    EXPECT_GE(d, 6000ms);
    EXPECT_LE(d, 8000ms);
  }
}

TEST(Backoff, OutOfRangeInputsAreClamped) {
  Backoff b{.initial = 100ms, .max = 1s, .multiplier = 0.5, .jitter = 7.0};
  EXPECT_EQ(b.delay(3, -1.0), 100ms);  // multiplier < 1 behaves as 1; uniform clamped to 0
  EXPECT_EQ(b.delay(3, 2.0), 0ms);     // jitter clamped to 1, uniform to 1
}

TEST(Backoff, MaxElapsedStopsTheNextAttempt) {
  Backoff forever{.initial = 100ms, .max = 1s, .multiplier = 2.0, .jitter = 0.0};
  EXPECT_FALSE(forever.exhausted(std::chrono::hours(1000)));
  EXPECT_TRUE(forever.next_delay(50, std::chrono::hours(1000)).has_value());

  Backoff budget{.initial = 100ms, .max = 1s, .multiplier = 2.0, .jitter = 0.0, .max_elapsed = 1s};
  EXPECT_FALSE(budget.exhausted(999ms));
  EXPECT_TRUE(budget.exhausted(1s));
  ASSERT_TRUE(budget.next_delay(0, 0ms, 0.0).has_value());
  EXPECT_EQ(*budget.next_delay(0, 0ms, 0.0), 100ms);
  EXPECT_TRUE(budget.next_delay(2, 500ms, 0.0).has_value());   // 500 + 400 < 1000
  EXPECT_FALSE(budget.next_delay(2, 700ms, 0.0).has_value());  // 700 + 400 >= 1000
}

TEST(PeriodicDelay, JitterIsSymmetricAroundThePeriod) {
  EXPECT_EQ(periodic_delay(1000ms, 0.1, 0.0), 900ms);
  EXPECT_EQ(periodic_delay(1000ms, 0.1, 1.0), 1100ms);
  EXPECT_EQ(periodic_delay(1000ms, 0.0, 0.7), 1000ms);
}

}  // namespace mooring::async
