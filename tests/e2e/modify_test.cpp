// Volume modify (CSI 1.12 ControllerModifyVolume) end to end with the real binaries, ACLs on:
// a volume created with MutableParameters is modified through mooring-hostpath while an
// allocation holds it (CSI modifies online), and the plugin's call log shows the one call with
// the volume's backend id, its keys and its secrets; an undeclared key is refused before the
// plugin is asked; a value the plugin refuses is recorded as failed and changes nothing; another
// namespace's volume cannot be modified by its id from a namespace token. A plugin without
// MODIFY_VOLUME refuses both MutableParameters at create and a modify, and is never called. Root only.
#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using Headers = std::map<std::string, std::string>;

json volume_body(const std::string& id, const json& mutable_parameters) {
  json v = {{"ID", id},
            {"PluginID", "hostpath"},
            {"RequestedCapacityMin", 1 << 20},
            {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}},
            {"Secrets", {{"token", "modify-secret"}}}};
  if (!mutable_parameters.empty()) v["MutableParameters"] = mutable_parameters;
  return json{{"Volumes", {v}}};
}

std::string modify_body(const json& params) { return json{{"MutableParameters", params}}.dump(); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class Modify : public ::testing::Test {
 protected:
  void start(std::vector<std::string> plugin_args = {}) {
    cluster = std::make_unique<Cluster>(ClusterOptions{.acl = true});
    cluster->start_controlplane();
    auto boot = cluster->request("POST", "/v1/acl/bootstrap");
    ASSERT_EQ(boot.status, 200u) << boot.body;
    mgmt = json::parse(boot.body)["SecretID"];
    cluster->use_token(mgmt);
    NodeOptions node;
    node.plugin_args = std::move(plugin_args);
    cluster->start_node("node-1", node);
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }
  HttpResult as(const std::string& secret, const std::string& method, const std::string& target,
                const std::string& body = {}) {
    return cluster->request(method, target, body, Headers{{"X-Mooring-Token", secret}});
  }
  std::vector<PluginCall> modifies() { return cluster->calls("node-1", "ControllerModifyVolume"); }

  std::unique_ptr<Cluster> cluster;
  std::string mgmt;
};

TEST_F(Modify, ChangesAMutableParameterOnlineThroughThePluginAndRecordsEachAnswer) {
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(cluster->create_namespace("team-a"));  // a write into an unknown namespace is refused
  ASSERT_TRUE(cluster->create_namespace("team-b"));
  const auto team_a = cluster->client_token("team-a", {{"Namespace", {{"team-a", {{"Policy", "write"}}}}}});
  auto made = cluster->request("PUT", "/v1/volume/csi/db/create?namespace=team-a",
                               volume_body("db", {{"tier", "standard"}, {"iops", "100"}}).dump());
  ASSERT_EQ(made.status, 200u) << made.body;
  auto other = cluster->request("PUT", "/v1/volume/csi/db/create?namespace=team-b",
                                volume_body("db", {{"tier", "standard"}}).dump());
  ASSERT_EQ(other.status, 200u) << other.body;
  const auto ext = cluster->get("/v1/volume/csi/db?namespace=team-a").value("ExternalID", "");
  ASSERT_FALSE(ext.empty());

  // An allocation holds the volume: a taken claim does not stop a modify.
  auto alloc = allocation("holder", "db", "node-1", "sleep 600");
  auto submitted = cluster->request("POST", "/v1/allocations?namespace=team-a", json{{"Allocation", alloc}}.dump());
  ASSERT_EQ(submitted.status, 200u) << submitted.body;
  ASSERT_TRUE(Cluster::eventually([&] {
    auto v = cluster->get("/v1/volume/csi/db?namespace=team-a");
    return v.value("CurrentWriters", 0) == 1;
  }));

  auto fast = as(team_a, "PUT", "/v1/volume/csi/db/modify?namespace=team-a", modify_body({{"tier", "fast"}}));
  ASSERT_EQ(fast.status, 200u) << fast.body;
  auto v = cluster->get("/v1/volume/csi/db?namespace=team-a");
  EXPECT_EQ(v["MutableParameters"], (json{{"tier", "fast"}, {"iops", "100"}}));
  EXPECT_EQ(v["LastModify"].value("State", ""), "applied");
  auto calls = modifies();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].volume_id, ext);
  EXPECT_EQ(calls[0].code, "OK");
  EXPECT_EQ(calls[0].parameters, (std::map<std::string, std::string>{{"tier", "fast"}}));
  EXPECT_EQ(calls[0].secrets_sha256, secrets_sha256({{"token", "modify-secret"}}));

  // Undeclared (and immutable) keys: refused before the plugin is asked.
  auto undeclared = as(team_a, "PUT", "/v1/volume/csi/db/modify?namespace=team-a", modify_body({{"colour", "red"}}));
  EXPECT_EQ(undeclared.status, 400u) << undeclared.body;
  EXPECT_TRUE(contains(undeclared.body, "\\\"colour\\\" is not one of its MutableParameters")) << undeclared.body;
  auto empty = as(team_a, "PUT", "/v1/volume/csi/db/modify?namespace=team-a", modify_body(json::object()));
  EXPECT_EQ(empty.status, 400u) << empty.body;
  EXPECT_EQ(modifies().size(), 1u);

  // A value the plugin cannot honour: INVALID_ARGUMENT, recorded as failed, nothing changed.
  auto gold = as(team_a, "PUT", "/v1/volume/csi/db/modify?namespace=team-a", modify_body({{"tier", "gold"}}));
  EXPECT_EQ(gold.status, 400u) << gold.body;
  EXPECT_TRUE(contains(gold.body, "not one of standard, fast, archive")) << gold.body;
  v = cluster->get("/v1/volume/csi/db?namespace=team-a");
  EXPECT_EQ(v["MutableParameters"].value("tier", ""), "fast");
  EXPECT_EQ(v["LastModify"].value("State", ""), "failed");
  EXPECT_EQ(v["LastModify"]["Parameters"], (json{{"tier", "gold"}}));
  EXPECT_EQ(modifies().size(), 2u);

  // Boundary: team B's volume by its id, from team A's token, through either namespace.
  auto cross = as(team_a, "PUT", "/v1/volume/csi/db/modify?namespace=team-b", modify_body({{"tier", "fast"}}));
  EXPECT_EQ(cross.status, 403u) << cross.body;
  auto absent = as(team_a, "PUT", "/v1/volume/csi/other/modify?namespace=team-a", modify_body({{"tier", "fast"}}));
  EXPECT_EQ(absent.status, 404u) << absent.body;
  EXPECT_EQ(modifies().size(), 2u);
  auto b = cluster->get("/v1/volume/csi/db?namespace=team-b");
  EXPECT_EQ(b["MutableParameters"], (json{{"tier", "standard"}}));
  EXPECT_TRUE(b["LastModify"].is_null()) << b["LastModify"];
}

TEST_F(Modify, APluginWithoutModifyVolumeIsNeverAskedToModify) {
  ASSERT_NO_FATAL_FAILURE(start({"--no-modify-volume"}));
  auto plugin = cluster->get("/v1/plugin/csi/hostpath");
  EXPECT_EQ(plugin["Controllers"]["node-1"]["ControllerInfo"].value("SupportsModify", true), false);
  auto declared = cluster->request("PUT", "/v1/volume/csi/db/create", volume_body("db", {{"tier", "fast"}}).dump());
  EXPECT_EQ(declared.status, 400u) << declared.body;
  EXPECT_TRUE(contains(declared.body, "MODIFY_VOLUME")) << declared.body;
  EXPECT_TRUE(cluster->calls("node-1", "CreateVolume").empty());

  auto plain = cluster->request("PUT", "/v1/volume/csi/db/create", volume_body("db", json::object()).dump());
  ASSERT_EQ(plain.status, 200u) << plain.body;
  auto refused = cluster->request("PUT", "/v1/volume/csi/db/modify", modify_body({{"tier", "fast"}}));
  EXPECT_EQ(refused.status, 400u) << refused.body;
  EXPECT_TRUE(contains(refused.body, "MODIFY_VOLUME")) << refused.body;
  EXPECT_TRUE(modifies().empty());
  EXPECT_TRUE(cluster->get("/v1/volume/csi/db")["LastModify"].is_null());
}

}  // namespace
}  // namespace mooring::e2e
