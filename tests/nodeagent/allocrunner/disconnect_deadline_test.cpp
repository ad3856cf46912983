// The disconnect deadline (issue 43): the task is told to stop once StopAfterClientDisconnect has
// passed since the last answered heartbeat was SENT, and is killed a margin before the control
// plane's earliest free of its claims (sent + heartbeat TTL + limit), the kill timeout cut short
// when it does not fit.
#include "services/nodeagent/allocrunner/disconnect_deadline.hpp"

#include <gtest/gtest.h>

namespace mooring::nodeagent {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const Clock::time_point kSent = Clock::time_point(100s);

TEST(DisconnectDeadline, TermAtTheLimitFromTheSendAndTheWholeKillTimeoutWhenItFits) {
  const Heard heard{kSent, 10s};
  const auto d = disconnect_deadline(heard, 30s, 5s);
  EXPECT_EQ(d.term_at, kSent + 30s);
  EXPECT_EQ(d.kill_at, kSent + 35s);
  EXPECT_EQ(earliest_free(heard, 30s), kSent + 40s);
}

TEST(DisconnectDeadline, AKillTimeoutLongerThanTheTtlAllowsIsCutShort) {
  const Heard heard{kSent, 2s};
  const auto d = disconnect_deadline(heard, 3s, 5s);
  EXPECT_EQ(d.term_at, kSent + 3s);
  EXPECT_EQ(d.kill_at, kSent + 3s + (2s - kDisconnectMargin));
  // A TTL shorter than the margin (or none known): killed at the limit.
  EXPECT_EQ(disconnect_deadline({kSent, 500ms}, 3s, 5s).kill_at, kSent + 3s);
  EXPECT_EQ(disconnect_deadline({kSent, 0ms}, 3s, 5s).kill_at, kSent + 3s);
}

// The bound itself, over a grid: the kill always comes a margin before the earliest free, the
// SIGTERM never before the limit has passed, and never after the kill.
TEST(DisconnectDeadline, TheKillComesAMarginBeforeTheEarliestFreeForEverySetting) {
  const milliseconds ttls[] = {0ms, 200ms, 1s, 2s, 10s, 60s};
  const milliseconds limits[] = {1ms, 1s, 3s, 30s, 600s};
  const milliseconds kills[] = {0ms, 100ms, 1s, 5s, 30s, 300s};
  for (const milliseconds ttl : ttls)
    for (const milliseconds limit : limits)
      for (const milliseconds kill : kills) {
        const Heard heard{kSent, ttl};
        const auto d = disconnect_deadline(heard, limit, kill);
        SCOPED_TRACE(testing::Message() << "ttl " << ttl.count() << " limit " << limit.count() << " kill "
                                        << kill.count());
        EXPECT_LE(d.kill_at, earliest_free(heard, limit) - std::min(kDisconnectMargin, ttl));
        EXPECT_EQ(d.term_at, kSent + limit);
        EXPECT_LE(d.term_at, d.kill_at);
        EXPECT_LE(d.kill_at - d.term_at, kill);
      }
}

}  // namespace
}  // namespace mooring::nodeagent
