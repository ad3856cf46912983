// The admission rules without sockets: limits, idle connections giving way, oldest idle first.
#include "services/controlplane/http/connection_limits.hpp"

#include <gtest/gtest.h>

namespace mooring::controlplane::http {
namespace {

using Refusal = ConnectionLimits::Refusal;

TEST(ConnectionLimits, AdmitsUnderBothLimitsAndCountsPerClient) {
  ConnectionLimits l(4, 2);
  EXPECT_FALSE(l.admit(1, "a").refused);
  EXPECT_FALSE(l.admit(2, "b").refused);
  EXPECT_FALSE(l.admit(3, "a").refused);
  EXPECT_EQ(l.size(), 3u);
  EXPECT_EQ(l.count("a"), 2u);
  EXPECT_EQ(l.count("c"), 0u);
  l.remove(1);
  l.remove(1);  // already gone: ignored
  EXPECT_EQ(l.count("a"), 1u);
  EXPECT_EQ(l.size(), 2u);
}

TEST(ConnectionLimits, RefusesAtTheGlobalLimitWhenNothingIsIdle) {
  ConnectionLimits l(2, 10);
  l.admit(1, "a");
  l.admit(2, "b");
  l.set_idle(1, false);
  l.set_idle(2, false);
  auto r = l.admit(3, "c");
  EXPECT_EQ(r.refused, Refusal::global);
  EXPECT_FALSE(r.evicted);
  EXPECT_EQ(l.size(), 2u);
  EXPECT_EQ(l.count("c"), 0u);
}

TEST(ConnectionLimits, RefusesAtTheClientLimitWhenNoneOfItsOwnIsIdle) {
  ConnectionLimits l(10, 2);
  l.admit(1, "a");
  l.admit(2, "a");
  l.admit(3, "b");  // idle, but another client's: it must not give way for a's limit
  l.set_idle(1, false);
  l.set_idle(2, false);
  auto r = l.admit(4, "a");
  EXPECT_EQ(r.refused, Refusal::per_client);
  EXPECT_FALSE(r.evicted);
  EXPECT_EQ(l.count("b"), 1u);
  EXPECT_FALSE(l.admit(5, "b").refused);
}

TEST(ConnectionLimits, AtTheGlobalLimitTheOldestIdleGivesWay) {
  ConnectionLimits l(3, 10);
  l.admit(1, "a");
  l.admit(2, "b");
  l.admit(3, "c");
  l.set_idle(1, false);  // busy: a request is being read or answered
  l.set_idle(2, false);
  l.set_idle(3, false);
  l.set_idle(3, true);   // idle since now
  l.set_idle(2, true);   // idle since later
  auto r = l.admit(4, "d");
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.evicted, 3u);
  EXPECT_EQ(l.size(), 3u);
  EXPECT_EQ(l.count("c"), 0u);
  EXPECT_EQ(l.admit(5, "e").evicted, 2u);
  // Now 1 is busy and 4, 5 are new (idle, 4 oldest).
  EXPECT_EQ(l.admit(6, "f").evicted, 4u);
}

TEST(ConnectionLimits, AtTheClientLimitItsOwnOldestIdleGivesWay) {
  ConnectionLimits l(10, 2);
  l.admit(1, "b");  // the oldest idle overall, but not a's
  l.admit(2, "a");
  l.admit(3, "a");
  auto r = l.admit(4, "a");
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.evicted, 2u);
  EXPECT_EQ(l.count("a"), 2u);
  EXPECT_EQ(l.count("b"), 1u);
}

TEST(ConnectionLimits, EvictedConnectionsAreForgottenSoLaterCallsAreHarmless) {
  ConnectionLimits l(1, 1);
  l.admit(1, "a");
  EXPECT_EQ(l.admit(2, "a").evicted, 1u);
  l.set_idle(1, false);
  l.set_idle(1, true);
  l.remove(1);
  EXPECT_EQ(l.size(), 1u);
  EXPECT_EQ(l.idle(), 1u);
  EXPECT_EQ(l.evict_oldest_idle(), 2u);
  EXPECT_EQ(l.size(), 0u);
  EXPECT_FALSE(l.evict_oldest_idle());
}

}  // namespace
}  // namespace mooring::controlplane::http
