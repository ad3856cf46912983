// End to end with the real binaries: two volumes written by tasks are snapshotted together
// (CreateVolumeGroupSnapshot through the agent's forward to hostpath's GroupController), the data
// changes, each member snapshot is restored into a new volume, and both restored volumes hold the
// data as of the group snapshot; then the group is deleted with its members. Root only.
#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

class GroupSnapshots : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    cluster->start_controlplane();
    cluster->start_node("node-1");
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }

  std::string write(const std::string& name, const std::string& volume, const std::string& text) {
    return cluster->run_task(name, volume, "node-1", "echo " + text + " > \"$MOORING_VOLUME_DATA/f\"");
  }
  std::string expect(const std::string& name, const std::string& volume, const std::string& text) {
    return cluster->run_task(name, volume, "node-1", "test \"$(cat \"$MOORING_VOLUME_DATA/f\")\" = " + text);
  }
  HttpResult restore(const std::string& id, const std::string& snapshot_id) {
    json body = {{"Volumes",
                  {{{"ID", id},
                    {"PluginID", "hostpath"},
                    {"SnapshotID", snapshot_id},
                    {"RequestedCapabilities",
                     {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
    return cluster->request("PUT", "/v1/volume/csi/" + id + "/create", body.dump());
  }

  std::unique_ptr<Cluster> cluster;
};

TEST_F(GroupSnapshots, BothRestoredMembersHoldTheDataAsOfTheGroupSnapshotThenTheGroupIsDeleted) {
  for (auto id : {"db", "wal"}) ASSERT_FALSE(cluster->create_volume(id, "single-node-writer", 1 << 20).is_null());
  ASSERT_EQ(write("w-db", "db", "db-v1"), "complete");
  ASSERT_EQ(write("w-wal", "wal", "wal-v1"), "complete");

  // The plugin's fingerprint says it can.
  auto plugin = cluster->get("/v1/plugin/csi/hostpath");
  ASSERT_TRUE(plugin.is_object());
  EXPECT_EQ(plugin["Controllers"]["node-1"]["ControllerInfo"].value("SupportsGroupSnapshot", false), true)
      << plugin.dump();

  json body = {{"GroupSnapshot", {{"Name", "consistent"}, {"SourceVolumeIDs", {"db", "wal"}}}}};
  auto made = cluster->request("PUT", "/v1/volumes/group-snapshot", body.dump());
  ASSERT_EQ(made.status, 200u) << made.body;
  auto group = json::parse(made.body)["GroupSnapshot"];
  const std::string group_id = group.value("ID", "");
  ASSERT_FALSE(group_id.empty()) << made.body;
  std::map<std::string, std::string> member;  // source volume -> snapshot id
  for (const auto& s : group["Snapshots"]) member[s.value("SourceVolumeID", "")] = s.value("ID", "");
  ASSERT_EQ(member.size(), 2u) << made.body;
  ASSERT_TRUE(member.contains("db") && member.contains("wal")) << made.body;
  EXPECT_EQ(cluster->calls("node-1", "CreateVolumeGroupSnapshot").size(), 1u);
  // The same request again answers the same group.
  auto again = cluster->request("PUT", "/v1/volumes/group-snapshot", body.dump());
  ASSERT_EQ(again.status, 200u) << again.body;
  EXPECT_EQ(json::parse(again.body)["GroupSnapshot"].value("ID", ""), group_id);

  // The data moves on after the group snapshot.
  ASSERT_EQ(write("w2-db", "db", "db-v2"), "complete");
  ASSERT_EQ(write("w2-wal", "wal", "wal-v2"), "complete");

  auto r1 = restore("db-restored", member["db"]);
  ASSERT_EQ(r1.status, 200u) << r1.body;
  auto r2 = restore("wal-restored", member["wal"]);
  ASSERT_EQ(r2.status, 200u) << r2.body;
  EXPECT_EQ(expect("check-db", "db-restored", "db-v1"), "complete");
  EXPECT_EQ(expect("check-wal", "wal-restored", "wal-v1"), "complete");
  EXPECT_EQ(expect("check-db-now", "db", "db-v2"), "complete");

  // Listed and read back; a member cannot be deleted on its own.
  auto listed = cluster->get("/v1/volumes/group-snapshot?plugin_id=hostpath");
  ASSERT_TRUE(listed.is_object());
  ASSERT_EQ(listed["GroupSnapshots"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["GroupSnapshots"][0]["Snapshots"].size(), 2u);
  auto one = cluster->get("/v1/volumes/group-snapshot/" + group_id + "?plugin_id=hostpath");
  ASSERT_TRUE(one.is_object());
  EXPECT_EQ(one["GroupSnapshot"].value("ID", ""), group_id);
  auto lone = cluster->request("DELETE", "/v1/volumes/snapshot?plugin_id=hostpath&snapshot_id=" + member["db"]);
  EXPECT_EQ(lone.status, 409u) << lone.body;

  auto gone = cluster->request("DELETE", "/v1/volumes/group-snapshot?plugin_id=hostpath&group_snapshot_id=" + group_id);
  ASSERT_EQ(gone.status, 200u) << gone.body;
  auto after = cluster->get("/v1/volumes/group-snapshot?plugin_id=hostpath");
  ASSERT_TRUE(after.is_object());
  EXPECT_TRUE(after["GroupSnapshots"].empty()) << after.dump();
  auto snaps = cluster->get("/v1/volumes/snapshot?plugin_id=hostpath");
  ASSERT_TRUE(snaps.is_object());
  EXPECT_TRUE(snaps["Snapshots"].empty()) << snaps.dump();
  // The restored volumes are independent of the deleted snapshots.
  EXPECT_EQ(expect("check-db-after", "db-restored", "db-v1"), "complete");
}

TEST_F(GroupSnapshots, VolumesOfAnotherNamespaceOrAnUnknownVolumeAreRefusedNamingIt) {
  ASSERT_FALSE(cluster->create_volume("db", "single-node-writer", 1 << 20).is_null());
  json body = {{"GroupSnapshot", {{"Name", "g"}, {"SourceVolumeIDs", {"db", "ghost"}}}}};
  auto r = cluster->request("PUT", "/v1/volumes/group-snapshot", body.dump());
  EXPECT_EQ(r.status, 400u) << r.body;
  EXPECT_NE(r.body.find("\\\"ghost\\\""), std::string::npos) << r.body;
  ASSERT_TRUE(cluster->create_namespace("team-b"));  // it exists; "db" is not in it
  auto other = cluster->request("PUT", "/v1/volumes/group-snapshot?namespace=team-b",
                                json{{"GroupSnapshot", {{"Name", "g"}, {"SourceVolumeIDs", {"db"}}}}}.dump());
  EXPECT_EQ(other.status, 400u) << other.body;
  EXPECT_TRUE(cluster->calls("node-1", "CreateVolumeGroupSnapshot").empty());
}

}  // namespace
}  // namespace mooring::e2e
