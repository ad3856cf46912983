// The leader's view of its own lease (ha/lease_health.hpp): only an answer from etcd ends a
// leadership; silence degrades it, and it leads again when etcd confirms the lease and the key.
#include "services/controlplane/ha/lease_health.hpp"

#include <gtest/gtest.h>

namespace mooring::controlplane::ha {
namespace {

using namespace std::chrono_literals;
using Clock = LeaseHealth::Clock;
using Next = LeaseHealth::Next;
using Role = LeaseHealth::Role;

const Clock::time_point t0{std::chrono::hours(1)};

TEST(LeaseHealth, RenewalsAnsweredInTimeKeepLeadingAndMoveTheDeadline) {
  LeaseHealth h(t0, 2s);
  EXPECT_TRUE(h.lease_valid(t0 + 1s));
  EXPECT_FALSE(h.lease_valid(t0 + 2s));
  EXPECT_EQ(h.renewed(t0 + 500ms, 2s), Next::nothing);
  EXPECT_EQ(h.deadline(), t0 + 2500ms);
  EXPECT_EQ(h.last_confirmed(), t0 + 500ms);
  EXPECT_TRUE(h.lease_valid(t0 + 2400ms));
  EXPECT_EQ(h.role(), Role::leading);
}

TEST(LeaseHealth, UnansweredRenewalsDegradeOnlyOnceTheDeadlinePasses) {
  LeaseHealth h(t0, 2s);
  EXPECT_EQ(h.unanswered(t0 + 1s), Next::nothing);
  EXPECT_EQ(h.role(), Role::leading);
  EXPECT_EQ(h.unanswered(t0 + 2s), Next::degrade);
  EXPECT_EQ(h.role(), Role::degraded);
  EXPECT_FALSE(h.lease_valid(t0 + 1s)) << "a degraded leader writes nothing, whatever the clock";
  EXPECT_EQ(h.unanswered(t0 + 30s), Next::nothing) << "degraded is reported once";
  EXPECT_EQ(h.role(), Role::degraded);
  EXPECT_EQ(h.last_confirmed(), t0);
}

// With a hold (LeaderElection: one lease), a lease past its deadline is only unconfirmed: writes
// are held, not refused, and a renewal answered in the hold (etcd elected a new raft leader)
// leads on without ever degrading.
TEST(LeaseHealth, WithAHoldTheLeaderDegradesOnlyOnceTheHoldIsOverAndARenewalInItLeadsOn) {
  LeaseHealth h(t0, 2s, 2s);
  EXPECT_EQ(h.held_until(), t0 + 4s);
  EXPECT_EQ(h.unanswered(t0 + 2500ms), Next::nothing);
  EXPECT_EQ(h.role(), Role::leading);
  EXPECT_FALSE(h.lease_valid(t0 + 2500ms)) << "past the deadline nothing is written without a renewal";
  EXPECT_EQ(h.renewed(t0 + 2600ms, 2s), Next::nothing);
  EXPECT_TRUE(h.lease_valid(t0 + 3s));
  EXPECT_EQ(h.deadline(), t0 + 4600ms);
  EXPECT_EQ(h.unanswered(t0 + 6s), Next::nothing);
  EXPECT_EQ(h.unanswered(t0 + 6600ms), Next::degrade);
  EXPECT_EQ(h.role(), Role::degraded);
}

TEST(LeaseHealth, EtcdSayingTheLeaseIsGoneLosesAtOnceLeadingOrDegraded) {
  LeaseHealth leading(t0, 2s);
  EXPECT_EQ(leading.renewed(t0 + 500ms, 0s), Next::lose);
  EXPECT_EQ(leading.role(), Role::lost);
  EXPECT_FALSE(leading.lease_valid(t0 + 600ms));

  LeaseHealth degraded(t0, 2s);
  ASSERT_EQ(degraded.unanswered(t0 + 3s), Next::degrade);
  EXPECT_EQ(degraded.renewed(t0 + 10s, -1s), Next::lose);
  EXPECT_EQ(degraded.role(), Role::lost);
}

TEST(LeaseHealth, ADegradedLeaderWhoseLeaseSurvivedLeadsAgainOnlyWhenTheKeyIsStillItsOwn) {
  LeaseHealth h(t0, 2s);
  ASSERT_EQ(h.unanswered(t0 + 2s), Next::degrade);
  EXPECT_EQ(h.renewed(t0 + 20s, 2s), Next::check_key);
  EXPECT_EQ(h.role(), Role::degraded) << "not leading before the key is checked";
  EXPECT_FALSE(h.lease_valid(t0 + 20s));
  EXPECT_EQ(h.key_checked(LeaseHealth::Key::ours), Next::restore);
  EXPECT_EQ(h.role(), Role::leading);
  EXPECT_EQ(h.deadline(), t0 + 22s);
  EXPECT_EQ(h.last_confirmed(), t0 + 20s);
  EXPECT_TRUE(h.lease_valid(t0 + 21s));
}

TEST(LeaseHealth, AKeyGoneOrHeldByAnotherLeaderLoses) {
  for (auto key : {LeaseHealth::Key::gone, LeaseHealth::Key::other}) {
    LeaseHealth h(t0, 2s);
    ASSERT_EQ(h.unanswered(t0 + 2s), Next::degrade);
    ASSERT_EQ(h.renewed(t0 + 5s, 2s), Next::check_key);
    EXPECT_EQ(h.key_checked(key), Next::lose);
    EXPECT_EQ(h.role(), Role::lost);
    EXPECT_FALSE(h.lease_valid(t0 + 5s));
  }
}

TEST(LeaseHealth, AKeyCheckWithoutAnAnswerStaysDegradedAndAsksAgain) {
  LeaseHealth h(t0, 2s);
  ASSERT_EQ(h.unanswered(t0 + 2s), Next::degrade);
  ASSERT_EQ(h.renewed(t0 + 5s, 2s), Next::check_key);
  EXPECT_EQ(h.key_checked(LeaseHealth::Key::unanswered), Next::nothing);
  EXPECT_EQ(h.role(), Role::degraded);
  EXPECT_EQ(h.last_confirmed(), t0) << "nothing was confirmed";
  EXPECT_EQ(h.key_checked(LeaseHealth::Key::ours), Next::nothing) << "a key check answers one renewal only";
  ASSERT_EQ(h.renewed(t0 + 6s, 2s), Next::check_key);
  EXPECT_EQ(h.key_checked(LeaseHealth::Key::ours), Next::restore);
}

TEST(LeaseHealth, LostIsFinal) {
  LeaseHealth h(t0, 2s);
  ASSERT_EQ(h.renewed(t0 + 500ms, 0s), Next::lose);
  EXPECT_EQ(h.renewed(t0 + 1s, 2s), Next::nothing);
  EXPECT_EQ(h.unanswered(t0 + 10s), Next::nothing);
  EXPECT_EQ(h.key_checked(LeaseHealth::Key::ours), Next::nothing);
  EXPECT_EQ(h.role(), Role::lost);
}

}  // namespace
}  // namespace mooring::controlplane::ha
