// A plugin shipped as separate controller and node processes, both on one node agent under one
// plugin id (the common shape of third-party drivers): the real binaries, mooring-hostpath started
// twice (--mode controller and --mode node). Both instances are fingerprinted and reported, the
// plugin status counts each, controller calls reach the controller process and node calls the
// node process. Root only (bind mounts).
#include <gtest/gtest.h>

#include <set>

#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

// The pids that answered `rpcs` in the node's plugin call log.
std::set<std::int64_t> pids_of(const std::vector<PluginCall>& calls, const std::set<std::string>& rpcs) {
  std::set<std::int64_t> out;
  for (const auto& c : calls)
    if (rpcs.contains(c.rpc)) out.insert(c.pid);
  return out;
}

TEST(SplitPlugin, ControllerAndNodeInstancesOfOnePluginOnOneAgentServeAVolumeLifecycle) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster;
  cluster.start_controlplane();
  cluster.start_node("node-1", NodeOptions{.plugin_type = "split"});

  // The plugin status counts the controller and the node instance, each with its own type.
  auto plugin = cluster.get("/v1/plugin/csi/hostpath");
  ASSERT_TRUE(plugin.is_object());
  EXPECT_EQ(plugin.value("ControllersHealthy", 0), 1) << plugin.dump(2);
  EXPECT_EQ(plugin.value("ControllersExpected", 0), 1);
  EXPECT_EQ(plugin.value("NodesHealthy", 0), 1);
  EXPECT_EQ(plugin.value("NodesExpected", 0), 1);
  EXPECT_EQ(plugin["Controllers"]["node-1"].value("Type", ""), "controller");
  EXPECT_EQ(plugin["Nodes"]["node-1"].value("Type", ""), "node");
  auto node = cluster.get("/v1/node/node-1");
  EXPECT_EQ(node["Plugins"]["hostpath"].value("Type", ""), "node") << node.dump(2);
  EXPECT_EQ(node["SplitControllers"]["hostpath"].value("Type", ""), "controller") << node.dump(2);

  // `mooring plugin status` shows both.
  const auto out_file = cluster.dir() / "plugin-status.out";
  test::ChildProcess cli(test::SpawnOptions{
      .binary = test::binary_path("cli/mooring"),
      .args = {"plugin", "status", "hostpath"},
      .env = {{"MOORING_ADDR", "http://127.0.0.1:" + std::to_string(cluster.http_port())}},
      .output_file = out_file});
  auto status = cli.wait_for_exit(30s);
  ASSERT_TRUE(status && status->exited && status->code == 0) << test::read_file(out_file);
  const auto out = test::read_file(out_file);
  EXPECT_NE(out.find("Controllers Healthy"), std::string::npos) << out;
  EXPECT_NE(out.find("1/1"), std::string::npos) << out;
  const auto controllers = out.find("\nControllers\n");
  const auto nodes = out.find("\nNodes\n");
  ASSERT_NE(controllers, std::string::npos) << out;
  ASSERT_NE(nodes, std::string::npos) << out;
  EXPECT_NE(out.substr(controllers, nodes - controllers).find("node-1"), std::string::npos) << out;
  EXPECT_NE(out.substr(nodes).find("node-1"), std::string::npos) << out;

  // A volume created, claimed, published, written, released.
  ASSERT_FALSE(cluster.create_volume("data").is_null());
  auto writer = cluster.run_alloc(
      allocation("writer", "data", "node-1", "echo split > \"$MOORING_VOLUME_DATA/greeting\"; sleep 600"));
  ASSERT_FALSE(writer.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.alloc_status(writer) == "running"; }));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.mounts_of("node-1").size() >= 1; }));
  EXPECT_EQ(cluster.volume("data")["Claims"].size(), 1u);
  ASSERT_EQ(cluster.stop_alloc(writer).status, 200);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.claim_count("data") == 0; }));
  EXPECT_TRUE(cluster.mounts_of("node-1").empty());

  // Controller calls went to one process, node calls to the other.
  const auto calls = cluster.calls("node-1");
  const auto controller_pids = pids_of(calls, {"CreateVolume", "ControllerPublishVolume", "ControllerUnpublishVolume"});
  const auto node_pids = pids_of(calls, {"NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume",
                                         "NodeUnstageVolume", "NodeGetInfo"});
  ASSERT_EQ(controller_pids.size(), 1u);
  ASSERT_EQ(node_pids.size(), 1u);
  EXPECT_NE(*controller_pids.begin(), *node_pids.begin());
  EXPECT_EQ(cluster.calls("node-1", "ControllerPublishVolume").size(), 1u);
  EXPECT_EQ(cluster.calls("node-1", "ControllerUnpublishVolume").size(), 1u);
  EXPECT_EQ(cluster.calls("node-1", "NodeUnstageVolume").size(), 1u);
  // The data landed in the volume the controller created.
  bool written = false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cluster.dir() / "hostpath" / "volumes"))
    written = written || (e.path().filename() == "greeting" && test::read_file(e.path()) == "split\n");
  EXPECT_TRUE(written);
}

}  // namespace
}  // namespace mooring::e2e
