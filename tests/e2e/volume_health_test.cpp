// CSI reach on the real binaries: registration is checked by the plugin's controller
// (ValidateVolumeCapabilities) and one backend volume is registered once; the agent polls
// NodeGetVolumeStats of a published volume, its usage appears per claim, and an abnormal condition
// (the plugin's fault file) raises an event, then clears. Root only (bind mounts).
#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

json registration(const std::string& id, const std::string& external_id, const std::string& attachment) {
  return {{"Volumes",
           {{{"ID", id},
             {"PluginID", "hostpath"},
             {"ExternalID", external_id},
             {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", attachment}}}}}}}};
}

bool has_event(Cluster& cluster, const std::string& type) {
  for (const auto& e : cluster.get("/v1/events?topic=Volume"))
    if (e.value("Type", "") == type) return true;
  return false;
}

TEST(VolumeHealth, UsageAndAnAbnormalConditionReachTheClaimAndRaiseEvents) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster;
  cluster.start_controlplane();
  cluster.start_node("node-1", NodeOptions{.agent_args = {"--volume-stats-interval", "300ms"}});
  auto created = cluster.create_volume("health");
  ASSERT_FALSE(created.is_null());
  const std::string external = cluster.volume("health").value("ExternalID", "");
  ASSERT_FALSE(external.empty());

  // Registration asks the controller: an unknown external id and an unsupported capability are
  // refused, and the same backend volume under a second id is a conflict naming the first.
  auto unknown = cluster.request("PUT", "/v1/volume/csi/ghost", registration("ghost", "no-such-volume", "file-system").dump());
  EXPECT_EQ(unknown.status, 400u) << unknown.body;
  EXPECT_NE(unknown.body.find("no-such-volume"), std::string::npos) << unknown.body;
  ASSERT_FALSE(cluster.create_volume("spare").is_null());  // deregistered: left at the plugin only
  const std::string spare = cluster.volume("spare").value("ExternalID", "");
  ASSERT_EQ(cluster.request("DELETE", "/v1/volume/csi/spare").status, 200u);
  auto block = cluster.request("PUT", "/v1/volume/csi/as-block", registration("as-block", spare, "block-device").dump());
  EXPECT_EQ(block.status, 400u) << block.body;
  EXPECT_NE(block.body.find("block-device"), std::string::npos) << block.body;
  EXPECT_EQ(cluster.request("GET", "/v1/volume/csi/as-block").status, 404u);
  auto as_dir = cluster.request("PUT", "/v1/volume/csi/as-dir", registration("as-dir", spare, "file-system").dump());
  EXPECT_EQ(as_dir.status, 200u) << as_dir.body;
  auto twice = cluster.request("PUT", "/v1/volume/csi/again", registration("again", external, "file-system").dump());
  EXPECT_EQ(twice.status, 409u) << twice.body;
  EXPECT_NE(json::parse(twice.body).value("Error", "").find("as volume \"health\""), std::string::npos) << twice.body;
  EXPECT_EQ(cluster.request("GET", "/v1/volume/csi/again").status, 404u);
  EXPECT_FALSE(cluster.calls("node-1", "ValidateVolumeCapabilities").empty());

  json holder = allocation("holder", "health", "node-1", "sleep 600");
  holder.erase("Task");  // no task: the allocation holds the volume until stopped
  auto id = cluster.run_alloc(holder);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.alloc_status(id) == "running"; }));

  auto claim = [&] {
    auto v = cluster.volume("health");
    return v.is_object() && v["Claims"].is_array() && !v["Claims"].empty() ? v["Claims"][0] : json();
  };
  ASSERT_TRUE(Cluster::eventually([&] {
    auto c = claim();
    return c.is_object() && c["Usage"].is_object() && c["Condition"].is_object();
  })) << claim().dump(2) << cluster.log_tails();
  auto c = claim();
  EXPECT_GT(c["Usage"].value("BytesTotal", 0), 0) << c.dump(2);
  EXPECT_GT(c["Usage"].value("InodesTotal", 0), 0) << c.dump(2);
  EXPECT_FALSE(c["Condition"].value("Abnormal", true)) << c.dump(2);
  EXPECT_FALSE(cluster.calls("node-1", "NodeGetVolumeStats").empty());

  cluster.set_faults("node-1", json::array({{{"rpc", "NodeGetVolumeStats"}, {"abnormal", "disk on fire"}}}));
  ASSERT_TRUE(Cluster::eventually([&] { return claim()["Condition"].value("Abnormal", false); })) << claim().dump(2);
  EXPECT_EQ(claim()["Condition"].value("Message", ""), "disk on fire");
  ASSERT_TRUE(Cluster::eventually([&] { return has_event(cluster, "VolumeConditionAbnormal"); }));
  // On demand: the node polls now and the read shows it.
  const auto calls_before = cluster.calls("node-1", "NodeGetVolumeStats").size();
  auto refreshed = cluster.get("/v1/volume/csi/health?stats=refresh");
  ASSERT_TRUE(refreshed.is_object());
  EXPECT_TRUE(refreshed["Claims"][0]["Condition"].value("Abnormal", false)) << refreshed.dump(2);
  EXPECT_GT(cluster.calls("node-1", "NodeGetVolumeStats").size(), calls_before);
  EXPECT_EQ(cluster.request("GET", "/v1/volume/csi/health?stats=later").status, 400u);

  // The CLI shows it.
  const auto out_file = cluster.dir() / "volume-status.out";
  test::ChildProcess cli(test::SpawnOptions{
      .binary = test::binary_path("cli/mooring"),
      .args = {"volume", "status", "health"},
      .env = {{"MOORING_ADDR", "http://127.0.0.1:" + std::to_string(cluster.http_port())}},
      .output_file = out_file});
  auto status = cli.wait_for_exit(30s);
  ASSERT_TRUE(status && status->exited && status->code == 0) << test::read_file(out_file);
  EXPECT_NE(test::read_file(out_file).find("ABNORMAL: disk on fire"), std::string::npos) << test::read_file(out_file);

  cluster.set_faults("node-1", json::array());
  ASSERT_TRUE(Cluster::eventually([&] { return !claim()["Condition"].value("Abnormal", true); })) << claim().dump(2);
  ASSERT_TRUE(Cluster::eventually([&] { return has_event(cluster, "VolumeConditionNormal"); }));

  ASSERT_EQ(cluster.stop_alloc(id).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.claim_count("health") == 0; }));
}

}  // namespace
}  // namespace mooring::e2e
