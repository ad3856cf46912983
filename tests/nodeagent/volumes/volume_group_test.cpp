// A non-root task's group on its writable volumes (issue 41), against a fake node plugin: carried
// as volume_mount_group when the plugin advertises VOLUME_MOUNT_GROUP, else given by the agent
// under the volume's GroupChangePolicy, recorded so a remount does not walk again, and reported
// with the volume's stats. Read-only claims and root tasks get nothing.
#include "tests/nodeagent/volumes/volume_manager_fixture.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;
constexpr uint32_t kGroup = 65534;

gid_t group_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_gid;
}

class VolumeGroupTest : public VolumeManagerTest {
 protected:
  void SetUp() override {
    VolumeManagerTest::SetUp();
    // The fake plugin mounts nothing: its publish makes the target directory a bind would show.
    csi->on_call = [](const FakeCall& c) {
      if (c.rpc == Rpc::NodePublishVolume) fs::create_directories(c.path);
    };
  }
  MountResult mount_for(const std::string& alloc, const domain::VolumeMount& v, std::optional<uint32_t> group,
                        domain::MountOptions request = {}) {
    return run(manager->mount(alloc, v, std::move(request), group));
  }
  std::optional<domain::VolumeOwnership> ownership(const std::string& alloc, const std::string& vol) const {
    for (const auto& r : manager->records())
      if (r.alloc_id == alloc && r.volume_id == vol) return r.ownership;
    ADD_FAILURE() << "no record of " << vol << " for " << alloc;
    return std::nullopt;
  }
};

TEST_F(VolumeGroupTest, APluginWithVolumeMountGroupGetsTheGroupInStageAndPublishAndTheAgentWalksNothing) {
  MOORING_REQUIRE_ROOT();
  plugins.set_healthy("fake", NodePlugin{csi, true, false, false, false, /*supports_mount_group=*/true});
  const auto r = mount_for("alloc-1", volume("vol1"), kGroup);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(csi->last_stage.volume_capability().mount().volume_mount_group(), "65534");
  EXPECT_EQ(csi->last_publish.volume_capability().mount().volume_mount_group(), "65534");
  EXPECT_EQ(group_of(r.path), 0u);  // the plugin's job, which this fake does not do
  const auto owned = ownership("alloc-1", "vol1");
  ASSERT_TRUE(owned);
  EXPECT_EQ(owned->group, kGroup);
  EXPECT_EQ(owned->by, "VOLUME_MOUNT_GROUP");
  EXPECT_FALSE(owned->walked);
  // Reported although this plugin has no stats: the claim's Ownership comes from it.
  const auto reports = run(manager->stats_of("vol1"));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].usage);
  ASSERT_TRUE(reports[0].ownership);
  EXPECT_EQ(reports[0].ownership->by, "VOLUME_MOUNT_GROUP");
}

TEST_F(VolumeGroupTest, WithoutItTheAgentGivesTheGroupOnceAndARemountDoesNotWalkAgain) {
  MOORING_REQUIRE_ROOT();
  const auto r = mount_for("alloc-1", volume("vol1"), kGroup);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(csi->last_publish.volume_capability().mount().volume_mount_group().empty());
  EXPECT_TRUE(csi->last_stage.volume_capability().mount().volume_mount_group().empty());
  EXPECT_EQ(group_of(r.path), kGroup);
  const auto first = ownership("alloc-1", "vol1");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->by, "OnRootMismatch");
  EXPECT_TRUE(first->walked);

  // The agent restarts and the target is gone: the mount is driven again, and the record says
  // the group was given, so the tree is not walked (the root's group, changed since, stays).
  EXPECT_TRUE(run(manager->shutdown(1s)));
  manager = make_manager();
  ASSERT_EQ(::chown(r.path.c_str(), static_cast<uid_t>(-1), 0), 0);
  table.mounted.erase(target("alloc-1", "vol1"));
  ASSERT_FALSE(manager->restore("alloc-1")[0].mounted);
  const auto again = mount_for("alloc-1", volume("vol1"), kGroup);
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(csi->count(Rpc::NodePublishVolume), 2);
  EXPECT_EQ(group_of(again.path), 0u);
  EXPECT_EQ(ownership("alloc-1", "vol1"), first);
}

TEST_F(VolumeGroupTest, PolicyNoneLeavesTheTreeAndAlwaysWalksAtEveryMount) {
  MOORING_REQUIRE_ROOT();
  const auto none = mount_for("alloc-1", volume("vol1"), kGroup, {.group_change_policy = domain::GroupChangePolicy::none});
  ASSERT_TRUE(none.ok()) << none.error;
  EXPECT_EQ(group_of(none.path), 0u);
  EXPECT_EQ(ownership("alloc-1", "vol1")->by, "None");
  EXPECT_FALSE(ownership("alloc-1", "vol1")->walked);

  auto always_volume = volume("vol2");
  always_volume.mount_options.group_change_policy = domain::GroupChangePolicy::always;  // the volume's own
  const auto a = mount_for("alloc-1", always_volume, kGroup);
  ASSERT_TRUE(a.ok()) << a.error;
  EXPECT_EQ(group_of(a.path), kGroup);
  EXPECT_EQ(ownership("alloc-1", "vol2")->by, "Always");
  EXPECT_TRUE(ownership("alloc-1", "vol2")->walked);
}

TEST_F(VolumeGroupTest, AReadOnlyClaimAndARootTaskGetNoGroup) {
  MOORING_REQUIRE_ROOT();
  plugins.set_healthy("fake", NodePlugin{csi, true, false, false, false, /*supports_mount_group=*/true});
  auto ro = volume("vol1");
  ro.read_only = true;
  ro.access_mode = AccessMode::single_node_reader_only;
  const auto r = mount_for("alloc-1", ro, kGroup);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(csi->last_publish.volume_capability().mount().volume_mount_group().empty());
  EXPECT_TRUE(csi->last_publish.readonly());
  EXPECT_FALSE(ownership("alloc-1", "vol1"));

  const auto root = mount_for("alloc-2", volume("vol2"), std::nullopt);
  ASSERT_TRUE(root.ok()) << root.error;
  EXPECT_TRUE(csi->last_publish.volume_capability().mount().volume_mount_group().empty());
  EXPECT_FALSE(ownership("alloc-2", "vol2"));
  EXPECT_TRUE(run(manager->stats_of("vol2")).empty());  // nothing to report without stats
}

}  // namespace
}  // namespace mooring::nodeagent
