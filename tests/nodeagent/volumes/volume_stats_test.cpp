// Volume stats on the node (NodeGetVolumeStats): what is asked, of which plugins, for which
// records, and that a stats call never overlaps another call for the same volume.
#include "services/nodeagent/volumes/volume_manager.hpp"

#include "tests/nodeagent/volumes/volume_manager_fixture.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "shared/async/wake_signal.hpp"

namespace mooring::nodeagent {
namespace {

class VolumeStatsTest : public VolumeManagerTest {
 protected:
  void SetUp() override {
    VolumeManagerTest::SetUp();
    plugins.set_healthy("fake", stats_plugin(true));
    auto* bytes = csi->stats_answer.add_usage();
    bytes->set_unit(::csi::v1::VolumeUsage::BYTES);
    bytes->set_total(1000);
    bytes->set_used(300);
    bytes->set_available(700);
    auto* inodes = csi->stats_answer.add_usage();
    inodes->set_unit(::csi::v1::VolumeUsage::INODES);
    inodes->set_total(64);
    inodes->set_used(4);
    inodes->set_available(60);
    csi->stats_answer.mutable_volume_condition()->set_abnormal(true);
    csi->stats_answer.mutable_volume_condition()->set_message("disk on fire");
  }
  NodePlugin stats_plugin(bool condition, bool stats = true) {
    NodePlugin p{csi, true};
    p.supports_stats = stats;
    p.supports_condition = condition;
    return p;
  }
  std::vector<domain::VolumeStatsReport> collect() { return run(manager->collect_stats()); }
};

TEST_F(VolumeStatsTest, EachPublicationIsAskedWithTheExternalIdTargetAndStagingPath) {
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  auto reports = collect();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(csi->last_stats.volume_id(), "ext-v1");
  EXPECT_EQ(csi->last_stats.volume_path(), target("a1", "v1"));
  EXPECT_EQ(csi->last_stats.staging_target_path(), staging("v1"));
  const auto& r = reports[0];
  EXPECT_EQ(r.volume_id, "v1");
  EXPECT_EQ(r.alloc_id, "a1");
  ASSERT_TRUE(r.usage);
  EXPECT_EQ(r.usage->bytes_used, 300);
  EXPECT_EQ(r.usage->bytes_total, 1000);
  EXPECT_EQ(r.usage->inodes_available, 60);
  ASSERT_TRUE(r.condition);
  EXPECT_TRUE(r.condition->abnormal);
  EXPECT_EQ(r.condition->message, "disk on fire");
}

TEST_F(VolumeStatsTest, APluginWithoutGetVolumeStatsIsNeverAsked) {
  plugins.set_healthy("fake", stats_plugin(true, false));
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  EXPECT_TRUE(collect().empty());
  EXPECT_EQ(csi->count(Rpc::NodeGetVolumeStats), 0);
}

TEST_F(VolumeStatsTest, TheConditionIsOnlyReadWhenThePluginAdvertisesIt) {
  plugins.set_healthy("fake", stats_plugin(false));
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  auto reports = collect();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].usage);
  EXPECT_FALSE(reports[0].condition);
}

TEST_F(VolumeStatsTest, AFailedCallLeavesThatPublicationOutUntilTheNextPoll) {
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  ASSERT_TRUE(mount("a1", volume("v2")).ok());
  csi->fail_next(Rpc::NodeGetVolumeStats, grpc::StatusCode::UNAVAILABLE, 1, "ext-v1");
  auto reports = collect();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].volume_id, "v2");
  EXPECT_EQ(collect().size(), 2u);
}

TEST_F(VolumeStatsTest, AVolumeBeingReleasedIsNotAsked) {
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  csi->hang(Rpc::NodeUnpublishVolume);
  manager->release("a1", {"v1"});
  ASSERT_TRUE(pump_until(io, [&] { return csi->count(Rpc::NodeUnpublishVolume) == 1; }, 5s));
  EXPECT_TRUE(collect().empty());
  EXPECT_EQ(csi->count(Rpc::NodeGetVolumeStats), 0);
  csi->hang(Rpc::NodeUnpublishVolume, false);
}

TEST_F(VolumeStatsTest, StatsNeverOverlapAnotherCallForTheSameVolume) {
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  ASSERT_TRUE(mount("a2", volume("v1")).ok());
  csi->delay = 30ms;
  bool collected = false;
  asio::co_spawn(io, manager->collect_stats(), [&](std::exception_ptr e, std::vector<domain::VolumeStatsReport> r) {
    EXPECT_FALSE(e);
    EXPECT_EQ(r.size(), 1u);  // a2 only: a1 is released meanwhile
    collected = true;
  });
  manager->release("a1", {"v1"});
  ASSERT_TRUE(pump_until(io, [&] { return collected && released("a1", "v1"); }, 10s));
  EXPECT_EQ(csi->max_in_flight_per_volume, 1);
}

TEST_F(VolumeStatsTest, AFreshPollAsksOnlyTheVolumesMountedSinceTheLastOne) {
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  (void)collect();  // a full pass covers v1
  const int before = csi->count(Rpc::NodeGetVolumeStats);
  ASSERT_TRUE(mount("a2", volume("v2")).ok());
  ASSERT_TRUE(mount("a3", volume("v3")).ok());
  EXPECT_EQ(manager->fresh_mounts(), 2u);
  auto reports = run(manager->collect_fresh_stats());
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].volume_id, "v2");
  EXPECT_EQ(reports[1].volume_id, "v3");
  EXPECT_EQ(csi->count(Rpc::NodeGetVolumeStats), before + 2);
  EXPECT_TRUE(run(manager->collect_fresh_stats()).empty());  // nothing fresh: no call
  EXPECT_EQ(csi->count(Rpc::NodeGetVolumeStats), before + 2);
}

TEST_F(VolumeStatsTest, AFreshMountReleasedBeforeThePollCostsNoCall) {
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  manager->release("a1", {"v1"});
  ASSERT_TRUE(pump_until(io, [&] { return released("a1", "v1"); }, 5s));
  EXPECT_TRUE(run(manager->collect_fresh_stats()).empty());
  EXPECT_EQ(csi->count(Rpc::NodeGetVolumeStats), 0);
}

TEST_F(VolumeStatsTest, ASuccessfulMountAsksForAStatsPollAtOnce) {
  async::WakeSignal mounted(io.get_executor());
  manager.reset();
  auto o = options();
  o.mounted = &mounted;
  manager = make_manager(o);
  int polls = 0;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> { co_await mounted.wait(mounted.generation());
    ++polls; }, asio::detached);
  ASSERT_TRUE(mount("a1", volume("v1")).ok());
  ASSERT_TRUE(pump_until(io, [&] { return polls == 1; }, 5s));
}

}  // namespace
}  // namespace mooring::nodeagent
