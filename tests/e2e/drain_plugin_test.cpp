// A drain's plugin-last order with a real plugin allocation (issue 44, docs/node-drain.md): node-1
// runs no configured plugin, only mooring-hostpath as an allocation (Task.CSIPlugin), and two
// allocations use its volumes, one marked Migrate (moved to node-2 at once) and one that runs
// until the deadline. The drain stops the volume users first; their NodeUnpublish and
// NodeUnstage are answered by the plugin allocation's own process while it still runs; each
// claim is freed; only then does the drain stop the plugin allocation. Read from the plugin's
// call log (its pid and times), the control plane's claim events and the allocation's events.
#include <gtest/gtest.h>

#include <algorithm>

#include "shared/domain/time.hpp"
#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

// Unix ms of the first event of `type` in an allocation's or the control plane's event list
// whose message names `mentions` ("" for any); 0 when none.
std::int64_t first_event_ms(const json& events, const std::string& type, const std::string& mentions = "") {
  if (!events.is_array()) return 0;
  for (const auto& e : events) {
    if (e.value("Type", "") != type || e.value("Message", "").find(mentions) == std::string::npos) continue;
    auto t = domain::parse_time(e.value("Time", ""));
    if (t) return domain::to_unix_ms(*t);
  }
  return 0;
}

TEST(DrainPlugin, ThePluginAllocationStopsOnlyAfterTheUnmountsItServesAreDoneThroughIt) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster;
  cluster.start_controlplane();
  cluster.start_node("node-1", NodeOptions{.configured_plugin = false});
  cluster.start_node("node-2");  // a configured hostpath: where the migrating allocation goes
  const auto plugin = cluster.run_plugin_alloc("node-1", {{"HealthTimeout", "30s"}});
  ASSERT_FALSE(plugin.empty());
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        auto p = cluster.get("/v1/plugin/csi/hostpath");
        const auto& n = p["Nodes"]["node-1"];
        return n.is_object() && n.value("Healthy", false) && n.value("AllocID", "") == plugin;
      },
      30s))
      << cluster.log_tails();

  std::map<std::string, std::string> users;  // volume -> allocation
  for (const auto& [vol, migrate] : {std::pair{"pv-mig", true}, std::pair{"pv-stay", false}}) {
    ASSERT_FALSE(cluster.create_volume(vol).is_null());
    auto a = allocation(vol, vol, "node-1", "exec sleep 600");
    a["Migrate"] = migrate;
    users[vol] = cluster.run_alloc(a);
    ASSERT_FALSE(users[vol].empty());
  }
  for (const auto& [vol, id] : users)
    ASSERT_TRUE(Cluster::eventually([&] { return cluster.alloc_status(id) == "running"; })) << vol;
  // The plugin allocation's process is the one that mounted them.
  const auto published = cluster.calls("node-1", "NodePublishVolume");
  ASSERT_EQ(published.size(), 2u);
  const auto plugin_pid = published.front().pid;
  ASSERT_GT(plugin_pid, 0);

  ASSERT_EQ(cluster.request("PUT", "/v1/node/node-1/drain", json{{"Deadline", 3}}.dump()).status, 200u);
  ASSERT_TRUE(Cluster::eventually(
      [&] { return cluster.get("/v1/node/node-1")["LastDrain"].value("Status", "") == "complete"; }, 60s))
      << cluster.get("/v1/node/node-1").dump() << cluster.log_tails();
  EXPECT_EQ(cluster.alloc_status(plugin), "complete");
  const auto plugin_alloc = cluster.get("/v1/allocation/" + plugin);
  const auto plugin_stop = first_event_ms(plugin_alloc["Events"], "StopRequested");
  ASSERT_GT(plugin_stop, 0) << plugin_alloc.dump();
  EXPECT_NE(plugin_alloc.dump().find("the plugin's volumes on the node are released"), std::string::npos)
      << plugin_alloc.dump();

  const auto events = cluster.get("/v1/events");
  const auto calls = cluster.calls("node-1");
  for (const auto& [vol, id] : users) {
    const auto csi_id = cluster.volume(vol).value("ExternalID", "");
    const auto user_stop = first_event_ms(cluster.get("/v1/allocation/" + id)["Events"], "StopRequested");
    ASSERT_GT(user_stop, 0) << vol;
    EXPECT_LT(user_stop, plugin_stop) << vol << ": the volume's user is stopped first";
    // Each unmount answered OK by the plugin allocation's process, before the drain stopped it.
    for (const std::string rpc : {"NodeUnpublishVolume", "NodeUnstageVolume"}) {
      auto done = std::find_if(calls.begin(), calls.end(), [&](const PluginCall& c) {
        return c.rpc == rpc && c.volume_id == csi_id && c.code == "OK";
      });
      ASSERT_NE(done, calls.end()) << vol << ": no " << rpc << " on node-1";
      EXPECT_EQ(done->pid, plugin_pid) << vol << ": " << rpc << " answered by another process";
      EXPECT_LE(done->unix_ms, plugin_stop) << vol << ": " << rpc << " after the plugin was stopped";
    }
    const auto freed = first_event_ms(events, "ClaimReleased", id);
    ASSERT_GT(freed, 0) << vol << ": the old claim was never freed";
    EXPECT_LE(freed, plugin_stop) << vol << ": the plugin was stopped while the claim was held";
  }
  // The node's plugin instance is gone with its allocation; the migrated user runs on node-2.
  ASSERT_TRUE(Cluster::eventually([&] {
    auto p = cluster.get("/v1/plugin/csi/hostpath");
    return !p["Nodes"].contains("node-1");
  }));
  bool moved = false;
  for (const auto& a : cluster.get("/v1/allocations"))
    moved |= a.value("MigratedFrom", "") == users["pv-mig"] && a.value("NodeID", "") == "node-2";
  EXPECT_TRUE(moved);
  for (const auto& a : cluster.get("/v1/allocations"))
    EXPECT_NE(a.value("MigratedFrom", ""), plugin) << "a plugin allocation is stopped, not migrated";
}

}  // namespace
}  // namespace mooring::e2e
