// End to end with the real binaries: a volume created through the API with parameters, context
// and secrets is written by a task, then cloned (CloneID: the source's external id, or its id
// here) and, after a snapshot, restored (SnapshotID). Each new volume holds the source's bytes, and the hostpath
// call log shows that its parameters and content source reached CreateVolume and that its
// context and secrets reached ControllerPublish, NodeStage and NodePublish. Secrets are compared
// only as digests; their values must appear in no log the cluster wrote and in no API answer.
// A clone of an unknown volume and a restore of an unknown snapshot are refused, naming it,
// with nothing stored. Root only.
#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using Strings = std::map<std::string, std::string>;

// Values that occur nowhere else, so finding one in a log or an answer can only be a leak.
Strings secrets_of(const std::string& volume) {
  return {{"password", "pw-" + volume + "-5e1f0c2b9d"}, {"username", "user-" + volume + "-a7c3e941"}};
}
const Strings kParameters = {{"tier", "gold"}, {"replicas", "2"}};
const Strings kContext = {{"team", "e2e"}};  // the operator's; the plugin adds "path"

class CloneRestore : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    // No answer may carry a secret: checked on every response the test gets.
    cluster->on_response([this](const std::string& request, const HttpResult& r) {
      for (const auto& secret : secret_values)
        EXPECT_EQ(r.body.find(secret), std::string::npos) << request << " answered a secret: " << r.body;
    });
    cluster->start_controlplane();
    cluster->start_node("node-1");
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    if (cluster && !HasFatalFailure()) expect_no_secret_in_logs();
    cluster.reset();
  }

  // PUT /v1/volume/csi/:id/create with the test's parameters and context, the volume's own
  // secrets, and `source` ({"CloneID": ...} or {"SnapshotID": ...}) if any.
  HttpResult create(const std::string& id, const json& source = json::object()) {
    for (const auto& [k, v] : secrets_of(id)) secret_values.push_back(v);
    json volume = {{"ID", id},
                   {"PluginID", "hostpath"},
                   {"RequestedCapacityMin", 1 << 20},
                   {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}},
                   {"Parameters", kParameters},
                   {"Context", kContext},
                   {"Secrets", secrets_of(id)}};
    volume.update(source);
    return cluster->request("PUT", "/v1/volume/csi/" + id + "/create", json{{"Volumes", {volume}}}.dump());
  }
  std::string write(const std::string& volume, const std::string& text) {
    return cluster->run_task("write-" + text, volume, "node-1", "echo " + text + " > \"$MOORING_VOLUME_DATA/f\"");
  }
  std::string expect(const std::string& volume, const std::string& text) {
    return cluster->run_task("read-" + volume, volume, "node-1",
                             "test \"$(cat \"$MOORING_VOLUME_DATA/f\")\" = " + text);
  }
  std::string external_id(const std::string& volume) { return cluster->volume(volume).value("ExternalID", ""); }

  // The plugin's calls of `rpc` for `volume_id` (CreateVolume: the volume's key, its CSI name).
  std::vector<PluginCall> calls(const std::string& rpc, const std::string& volume_id) {
    std::vector<PluginCall> out;
    for (auto& c : cluster->calls("node-1", rpc))
      if (c.volume_id == volume_id) out.push_back(std::move(c));
    return out;
  }

  // CreateVolume got the parameters, the source and the volume's secrets (by digest).
  void expect_created_with(const std::string& id, const std::string& content_source) {
    auto created = calls("CreateVolume", id);
    ASSERT_EQ(created.size(), 1u) << id;
    EXPECT_EQ(created[0].code, "OK");
    EXPECT_EQ(created[0].parameters, kParameters);
    EXPECT_EQ(created[0].content_source, content_source);
    EXPECT_EQ(created[0].secrets_sha256, secrets_sha256(secrets_of(id)));
  }

  // Each claim step got the volume's context (the operator's and the plugin's) and its secrets.
  void expect_claimed_with_context_and_secrets(const std::string& id) {
    const auto ext = external_id(id);
    ASSERT_FALSE(ext.empty()) << id;
    auto context = kContext;
    context["path"] = cluster->volume(id)["Context"].value("path", "");
    EXPECT_FALSE(context["path"].empty()) << cluster->volume(id).dump();
    for (const auto* rpc : {"ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"}) {
      auto made = calls(rpc, ext);
      ASSERT_FALSE(made.empty()) << rpc << " of " << id;
      for (const auto& c : made) {
        EXPECT_EQ(c.code, "OK") << rpc;
        EXPECT_EQ(c.volume_context, context) << rpc << " of " << id;
        EXPECT_EQ(c.secrets_sha256, secrets_sha256(secrets_of(id))) << rpc << " of " << id;
      }
    }
    // The node calls also carry what ControllerPublish answered.
    for (const auto* rpc : {"NodeStageVolume", "NodePublishVolume"})
      EXPECT_EQ(calls(rpc, ext).front().publish_context.count("node_id"), 1u) << rpc;
  }

  void expect_no_secret_in_logs() {
    const auto files = cluster->log_files();
    EXPECT_GE(files.size(), 3u);  // control plane, agent (with the plugin's output), call log
    for (const auto& file : files) {
      const auto text = test::read_file(file);
      for (const auto& secret : secret_values)
        EXPECT_EQ(text.find(secret), std::string::npos) << "secret " << secret << " in " << file;
    }
  }

  std::unique_ptr<Cluster> cluster;
  std::vector<std::string> secret_values;
};

TEST_F(CloneRestore, ACloneHoldsTheSourcesBytesAndParametersContextAndSecretsReachEveryCall) {
  auto made = create("source");
  ASSERT_EQ(made.status, 200u) << made.body;
  ASSERT_EQ(write("source", "cloned-bytes"), "complete");
  expect_created_with("source", "");
  const auto source_ext = external_id("source");
  ASSERT_FALSE(source_ext.empty());

  auto clone = create("copy", {{"CloneID", source_ext}});
  ASSERT_EQ(clone.status, 200u) << clone.body;
  expect_created_with("copy", "volume:" + source_ext);
  EXPECT_NE(external_id("copy"), source_ext);
  EXPECT_EQ(expect("copy", "cloned-bytes"), "complete");
  expect_claimed_with_context_and_secrets("copy");
  expect_claimed_with_context_and_secrets("source");

  // The source named by its id here: the plugin gets its external id.
  auto by_id = create("copy-by-id", {{"CloneID", "source"}});
  ASSERT_EQ(by_id.status, 200u) << by_id.body;
  expect_created_with("copy-by-id", "volume:" + source_ext);
  EXPECT_EQ(expect("copy-by-id", "cloned-bytes"), "complete");
}

TEST_F(CloneRestore, ARestoredVolumeHoldsTheDataAsOfTheSnapshotAndParametersContextAndSecretsReachEveryCall) {
  auto made = create("source");
  ASSERT_EQ(made.status, 200u) << made.body;
  ASSERT_EQ(write("source", "as-of-snapshot"), "complete");

  json body = {{"Snapshots", {{{"SourceVolumeID", "source"}, {"PluginID", "hostpath"}, {"Name", "before"}}}}};
  auto snap = cluster->request("PUT", "/v1/volumes/snapshot", body.dump());
  ASSERT_EQ(snap.status, 200u) << snap.body;
  const auto snapshot_id = json::parse(snap.body)["Snapshots"][0].value("ID", "");
  ASSERT_FALSE(snapshot_id.empty()) << snap.body;
  // The snapshot is taken with the source volume's secrets.
  auto snapshots = calls("CreateSnapshot", external_id("source"));
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].secrets_sha256, secrets_sha256(secrets_of("source")));

  ASSERT_EQ(write("source", "after-snapshot"), "complete");
  auto restored = create("restored", {{"SnapshotID", snapshot_id}});
  ASSERT_EQ(restored.status, 200u) << restored.body;
  expect_created_with("restored", "snapshot:" + snapshot_id);
  EXPECT_EQ(expect("restored", "as-of-snapshot"), "complete");
  expect_claimed_with_context_and_secrets("restored");
  EXPECT_EQ(expect("source", "after-snapshot"), "complete");
}

TEST_F(CloneRestore, AnUnknownCloneSourceOrSnapshotIsRefusedNamingItAndNothingIsStored) {
  auto clone = create("ghost-clone", {{"CloneID", "vol-does-not-exist"}});
  EXPECT_EQ(clone.status, 404u) << clone.body;  // the plugin's NOT_FOUND
  EXPECT_NE(clone.body.find("vol-does-not-exist"), std::string::npos) << clone.body;
  EXPECT_NE(clone.body.find("not found"), std::string::npos) << clone.body;

  auto restore = create("ghost-restore", {{"SnapshotID", "snap-does-not-exist"}});
  EXPECT_EQ(restore.status, 404u) << restore.body;
  EXPECT_NE(restore.body.find("snap-does-not-exist"), std::string::npos) << restore.body;
  EXPECT_NE(restore.body.find("not found"), std::string::npos) << restore.body;

  // The plugin refused both (NOT_FOUND, nothing made); the control plane stored neither.
  for (const auto* id : {"ghost-clone", "ghost-restore"}) {
    auto refused = calls("CreateVolume", id);
    ASSERT_EQ(refused.size(), 1u) << id;
    EXPECT_EQ(refused[0].code, "NOT_FOUND") << id;
    EXPECT_EQ(cluster->request("GET", std::string("/v1/volume/csi/") + id).status, 404u) << id;
  }
  auto listed = cluster->get("/v1/volumes");
  ASSERT_TRUE(listed.is_array()) << listed.dump();
  EXPECT_TRUE(listed.empty()) << listed.dump();
  EXPECT_TRUE(cluster->calls("node-1", "DeleteVolume").empty());
}

}  // namespace
}  // namespace mooring::e2e
