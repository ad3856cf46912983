// The volume manager after an agent restart, against a fake node plugin: what restore() keeps and
// what it asks to mount again. Staged is what the plugin answered (NodeStageVolume MAY mount
// nothing at the staging path), so only a lost publish target makes a volume be mounted again.
#include "tests/nodeagent/volumes/volume_manager_fixture.hpp"

namespace mooring::nodeagent {
namespace {

using namespace std::chrono_literals;
using csi::Rpc;

TEST_F(VolumeManagerTest, StagedIsWhatThePluginAnsweredNotWhatTheMountTableShows) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  table.mounted.erase(staging("vol1"));  // a plugin that stages without mounting anything there
  ASSERT_TRUE(mount("alloc-2", volume("vol1")).ok());
  EXPECT_EQ(csi->count(Rpc::NodeStageVolume), 1);  // staged once per volume and node

  EXPECT_TRUE(run(manager->shutdown(1s)));
  manager = make_manager();  // agent restart
  const auto restored = manager->restore("alloc-1");
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_TRUE(restored[0].mounted) << restored[0].reason;
  EXPECT_EQ(csi->count(Rpc::NodeStageVolume), 1);
  EXPECT_EQ(csi->count(Rpc::NodePublishVolume), 2);

  ASSERT_TRUE(run(manager->unmount("alloc-1", "vol1")).ok());
  ASSERT_TRUE(run(manager->unmount("alloc-2", "vol1")).ok());
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 1);
  EXPECT_TRUE(manager->records().empty());
}

TEST_F(VolumeManagerTest, AStageThePluginLostIsStagedAgainOnTheRetryOfTheMount) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  EXPECT_TRUE(run(manager->shutdown(1s)));
  manager = make_manager();  // agent restart after a reboot: target and stage are gone
  table.mounted.clear();
  ASSERT_FALSE(manager->restore("alloc-1")[0].mounted);
  // The record says staged, so only the publish is driven again; the plugin lost the stage.
  csi->fail_next(Rpc::NodePublishVolume, grpc::StatusCode::FAILED_PRECONDITION);
  auto first = mount("alloc-1", volume("vol1"));
  EXPECT_FALSE(first.ok());
  EXPECT_TRUE(first.retryable) << first.error;
  EXPECT_EQ(csi->count(Rpc::NodeStageVolume), 1);
  EXPECT_EQ(csi->count(Rpc::NodeUnstageVolume), 1);  // the failed mount gave up its stage
  auto again = mount("alloc-1", volume("vol1"));
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(csi->count(Rpc::NodeStageVolume), 2);
  EXPECT_TRUE(table.is_mounted(target("alloc-1", "vol1")));
}

TEST_F(VolumeManagerTest, RestoreKeepsConfirmedMountsAndAsksToRemountGoneOnes) {
  ASSERT_TRUE(mount("alloc-1", volume("vol1")).ok());
  ASSERT_TRUE(mount("alloc-1", volume("vol2")).ok());
  EXPECT_TRUE(run(manager->shutdown(1s)));
  manager = make_manager();  // agent restart
  table.mounted.erase(target("alloc-1", "vol2"));
  auto restored = manager->restore("alloc-1");
  ASSERT_EQ(restored.size(), 2u);
  EXPECT_EQ(restored[0].volume_id, "vol1");
  EXPECT_TRUE(restored[0].mounted);
  EXPECT_EQ(restored[0].path, target("alloc-1", "vol1"));
  EXPECT_EQ(restored[1].volume_id, "vol2");
  EXPECT_FALSE(restored[1].mounted);
  EXPECT_NE(restored[1].reason.find("not a mount point"), std::string::npos) << restored[1].reason;
  EXPECT_EQ(manager->mounted_allocations(), std::vector<std::string>{"alloc-1"});
  EXPECT_TRUE(manager->restore("alloc-unknown").empty());

  // Mounting again re-drives only what is missing.
  const auto stages = csi->count(Rpc::NodeStageVolume);
  auto again = mount("alloc-1", volume("vol2"));
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(csi->count(Rpc::NodeStageVolume), stages);  // the record says staged: only published again
  EXPECT_TRUE(manager->restore("alloc-1")[1].mounted);
}

}  // namespace
}  // namespace mooring::nodeagent
