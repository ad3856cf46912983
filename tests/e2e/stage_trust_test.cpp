// An agent restart with a plugin that stages without a mount (mooring-hostpath
// --stage-without-mount, the upstream host-path driver's shape), with the real binaries: the
// volume stays in use as it was, nothing is staged or published again, and the release still
// unstages once. Root only (bind mounts).
#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

bool has_event(const json& alloc, const std::string& type) {
  for (const auto& e : alloc.value("Events", json::array()))
    if (e.value("Type", "") == type) return true;
  return false;
}

TEST(StageTrust, AnAgentRestartKeepsAVolumeThePluginStagedWithoutAMount) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster;
  cluster.start_controlplane();
  cluster.start_node("node-1", NodeOptions{.plugin_args = {"--stage-without-mount"}});
  ASSERT_FALSE(cluster.create_volume("data").is_null());
  auto id = cluster.run_alloc(allocation("holder", "data", "node-1", "sleep 600"));
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.alloc_status(id) == "running"; }));
  ASSERT_EQ(cluster.mounts_of("node-1").size(), 1u) << "the publish target only: the stage mounted nothing";

  cluster.kill_node("node-1");  // kill -9: the task and the plugin stay
  cluster.start_node("node-1");
  ASSERT_TRUE(Cluster::eventually([&] { return has_event(cluster.get("/v1/allocation/" + id), "Restored"); }))
      << cluster.get("/v1/allocation/" + id).dump(2) << cluster.log_tails();
  const auto alloc = cluster.get("/v1/allocation/" + id);
  EXPECT_FALSE(has_event(alloc, "Remounting")) << alloc.dump(2);
  EXPECT_EQ(cluster.node_log("node-1").find("is not a mount point any more"), std::string::npos);
  EXPECT_EQ(cluster.calls("node-1", "NodeStageVolume").size(), 1u);
  EXPECT_EQ(cluster.calls("node-1", "NodePublishVolume").size(), 1u);

  ASSERT_EQ(cluster.stop_alloc(id).status, 200);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.claim_count("data") == 0; }));
  EXPECT_EQ(cluster.calls("node-1", "NodeUnstageVolume").size(), 1u);
  EXPECT_TRUE(cluster.mounts_of("node-1").empty());
}

}  // namespace
}  // namespace mooring::e2e
