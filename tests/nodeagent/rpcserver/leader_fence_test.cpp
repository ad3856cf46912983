#include "services/nodeagent/rpcserver/leader_fence.hpp"

#include <gtest/gtest.h>

#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

using domain::LeaderEpoch;

constexpr std::uint64_t kCluster = 0xabcdef;

TEST(LeaderFenceTest, KnowingNothingItServesEveryCallAndLearnsTheFirstEpoch) {
  LeaderFence fence({});
  EXPECT_FALSE(fence.admit(std::nullopt));  // a single control plane: no epoch, none checked
  EXPECT_TRUE(fence.current().none());
  EXPECT_FALSE(fence.admit(LeaderEpoch{kCluster, 7}));
  EXPECT_EQ(fence.current(), (LeaderEpoch{kCluster, 7}));
}

TEST(LeaderFenceTest, RefusesOlderEpochsOtherClustersAndCallsWithoutOne) {
  LeaderFence fence({});
  fence.heard(LeaderEpoch{kCluster, 20});
  EXPECT_FALSE(fence.admit(LeaderEpoch{kCluster, 20}));
  const auto older = fence.admit(LeaderEpoch{kCluster, 19});
  ASSERT_TRUE(older);
  EXPECT_NE(older->find("no longer leads"), std::string::npos) << *older;
  EXPECT_NE(older->find("abcdef/19"), std::string::npos) << *older;
  EXPECT_NE(older->find("abcdef/20"), std::string::npos) << *older;
  const auto none = fence.admit(std::nullopt);
  ASSERT_TRUE(none);
  EXPECT_NE(none->find("carries no leader epoch"), std::string::npos) << *none;
  const auto foreign = fence.admit(LeaderEpoch{kCluster + 1, 99});
  ASSERT_TRUE(foreign);
  EXPECT_NE(foreign->find("another etcd cluster"), std::string::npos) << *foreign;
  // A refusal changes nothing.
  EXPECT_EQ(fence.current(), (LeaderEpoch{kCluster, 20}));
}

TEST(LeaderFenceTest, ANewerCallRaisesTheEpochAndAnOlderAnswerDoesNotLowerIt) {
  LeaderFence fence({});
  fence.heard(LeaderEpoch{kCluster, 20});
  EXPECT_FALSE(fence.admit(LeaderEpoch{kCluster, 31}));  // the new leader called before it answered
  EXPECT_TRUE(fence.admit(LeaderEpoch{kCluster, 20}));
  fence.heard(LeaderEpoch{kCluster, 20});  // a late answer of the old leader
  EXPECT_EQ(fence.current(), (LeaderEpoch{kCluster, 31}));
  EXPECT_TRUE(fence.admit(LeaderEpoch{kCluster, 20}));
}

TEST(LeaderFenceTest, AnAnswerFromAnotherClusterReplacesTheEpoch) {
  LeaderFence fence({});
  fence.heard(LeaderEpoch{kCluster, 500});
  // etcd restored into a new cluster: its revisions start lower, and its leader answers.
  fence.heard(LeaderEpoch{kCluster + 1, 12});
  EXPECT_EQ(fence.current(), (LeaderEpoch{kCluster + 1, 12}));
  EXPECT_FALSE(fence.admit(LeaderEpoch{kCluster + 1, 12}));
  EXPECT_TRUE(fence.admit(LeaderEpoch{kCluster, 500}));
  // Moved to a single control plane on SQLite: its answers name no epoch, and its calls carry none.
  fence.heard(LeaderEpoch{});
  EXPECT_FALSE(fence.admit(std::nullopt));
}

TEST(LeaderFenceTest, TheEpochSurvivesARestartAndABadFileIsLearntAgain) {
  test::TempDir dir("mooring-fence");
  const auto file = dir.path() / "leader-epoch";
  {
    LeaderFence fence(file);
    EXPECT_TRUE(fence.current().none());
    fence.heard(LeaderEpoch{kCluster, 40});
  }
  EXPECT_EQ(test::read_file(file), "abcdef/40\n");
  {
    LeaderFence restarted(file);
    EXPECT_EQ(restarted.current(), (LeaderEpoch{kCluster, 40}));
    EXPECT_TRUE(restarted.admit(LeaderEpoch{kCluster, 39}));
    EXPECT_FALSE(restarted.admit(LeaderEpoch{kCluster, 41}));
  }
  EXPECT_EQ(test::read_file(file), "abcdef/41\n");
  test::write_file(file, "not an epoch");
  LeaderFence unreadable(file);
  EXPECT_TRUE(unreadable.current().none());
  EXPECT_FALSE(unreadable.admit(LeaderEpoch{kCluster, 2}));
  EXPECT_EQ(test::read_file(file), "abcdef/2\n");
}

}  // namespace
}  // namespace mooring::nodeagent
