// Tenancy of the objects a plugin holds rather than a namespace, end to end with the real
// binaries, mutual TLS and ACLs on. Team B's volume, snapshot and group snapshot are made with
// the management token; a token with write on team-a only then tries them through every entry a
// plugin-level id has: the external, snapshot and group-snapshot listings, CloneID and
// SnapshotID on create, snapshot and group-snapshot deletes, a registration of team B's
// ExternalID. Each is refused (or shows nothing of team-b), names nothing of team-b and changes
// nothing, while an operator token (plugin:read + operator:read) still sees the whole listing.
// Root only.
#include <gtest/gtest.h>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using Headers = std::map<std::string, std::string>;

json volume_body(const std::string& id, const json& extra = json::object()) {
  json v = {{"ID", id},
            {"PluginID", "hostpath"},
            {"RequestedCapacityMin", 1 << 20},
            {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}};
  v.update(extra);
  return json{{"Volumes", {v}}};
}

class Tenancy : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>(ClusterOptions{.mutual_tls = true, .acl = true});
    cluster->start_controlplane();
    auto boot = cluster->request("POST", "/v1/acl/bootstrap");
    ASSERT_EQ(boot.status, 200u) << boot.body;
    mgmt = json::parse(boot.body)["SecretID"];
    cluster->use_token(mgmt);
    for (const auto* ns : {"team-a", "team-b"})  // namespaces are made before anything is written into them
      ASSERT_TRUE(cluster->create_namespace(ns));
    team_a = token("team-a", {{"Namespace", {{"team-a", {{"Policy", "write"}}}}}});
    ops = token("ops", {{"Namespace", {{"*", {{"Policy", "read"}}}}}, {"Plugin", "read"}, {"Operator", "read"}});
    cluster->start_node("node-1");
    make_team_b();
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }

  std::string token(const std::string& name, const json& rules) {
    auto p = cluster->request("PUT", "/v1/acl/policy/" + name, json{{"Rules", rules}}.dump());
    EXPECT_EQ(p.status, 200u) << p.body;
    auto t = cluster->request("PUT", "/v1/acl/token",
                              json{{"Name", name}, {"Type", "client"}, {"Policies", {name}}}.dump());
    EXPECT_EQ(t.status, 200u) << t.body;
    return t.status == 200 ? json::parse(t.body).value("SecretID", "") : "";
  }
  HttpResult as(const std::string& token, const std::string& method, const std::string& target,
                const std::string& body = {}) {
    return cluster->request(method, target, body, Headers{{"X-Mooring-Token", token}});
  }
  json get_as(const std::string& token, const std::string& target) {
    auto r = as(token, "GET", target);
    EXPECT_EQ(r.status, 200u) << target << ": " << r.body;
    return r.status == 200 ? json::parse(r.body) : json();
  }
  HttpResult create_in(const std::string& token, const std::string& ns, const std::string& id,
                       const json& extra = json::object()) {
    return as(token, "PUT", "/v1/volume/csi/" + id + "/create?namespace=" + ns, volume_body(id, extra).dump());
  }
  std::string external_id(const std::string& ns, const std::string& id) {
    return get_as(mgmt, "/v1/volume/csi/" + id + "?namespace=" + ns).value("ExternalID", "");
  }

  // Team B's volume, a snapshot of it and a group snapshot of it, and a backend volume no
  // namespace registers any more (created in default, then deregistered: its storage stays).
  void make_team_b() {
    auto made = create_in(mgmt, "team-b", "secret-b");
    ASSERT_EQ(made.status, 200u) << made.body;
    ext_b = external_id("team-b", "secret-b");
    ASSERT_FALSE(ext_b.empty());
    json snap = {{"Snapshots", {{{"SourceVolumeID", "secret-b"}, {"Name", "nightly-b"}}}}};
    auto s = as(mgmt, "PUT", "/v1/volumes/snapshot?namespace=team-b", snap.dump());
    ASSERT_EQ(s.status, 200u) << s.body;
    snap_b = json::parse(s.body)["Snapshots"][0].value("ID", "");
    json group = {{"GroupSnapshot", {{"Name", "group-b"}, {"SourceVolumeIDs", {"secret-b"}}}}};
    auto g = as(mgmt, "PUT", "/v1/volumes/group-snapshot?namespace=team-b", group.dump());
    ASSERT_EQ(g.status, 200u) << g.body;
    group_b = json::parse(g.body)["GroupSnapshot"].value("ID", "");
    ASSERT_FALSE(snap_b.empty() || group_b.empty());

    auto orphan = create_in(mgmt, "default", "orphan");
    ASSERT_EQ(orphan.status, 200u) << orphan.body;
    ext_orphan = external_id("default", "orphan");
    ASSERT_EQ(as(mgmt, "DELETE", "/v1/volume/csi/orphan").status, 200u);  // deregistered, not deleted
  }

  // Nothing in `body` names team B or its objects.
  void expect_nothing_of_team_b(const std::string& what, const std::string& body) {
    for (const auto& secret : {std::string("team-b"), std::string("secret-b"), std::string("nightly-b"), ext_b, snap_b,
                               group_b, ext_orphan})
      EXPECT_EQ(body.find(secret), std::string::npos) << what << " shows \"" << secret << "\": " << body;
  }

  std::unique_ptr<Cluster> cluster;
  std::string mgmt, team_a, ops;
  std::string ext_b, snap_b, group_b, ext_orphan;
};

TEST_F(Tenancy, PluginListingsShowANamespaceTokenNothingOfAnotherNamespaceAndTheOperatorEverything) {
  auto mine = create_in(team_a, "team-a", "mine");
  ASSERT_EQ(mine.status, 200u) << mine.body;
  const auto ext_a = external_id("team-a", "mine");

  for (const std::string ns : {"team-a", "*"}) {
    const auto q = "?plugin_id=hostpath&namespace=" + ns;
    auto external = as(team_a, "GET", "/v1/volumes/external" + q);
    ASSERT_EQ(external.status, 200u) << external.body;
    expect_nothing_of_team_b("external list in " + ns, external.body);
    EXPECT_NE(external.body.find(ext_a), std::string::npos) << "its own volume is listed: " << external.body;
    auto snapshots = as(team_a, "GET", "/v1/volumes/snapshot" + q);
    ASSERT_EQ(snapshots.status, 200u) << snapshots.body;
    expect_nothing_of_team_b("snapshot list in " + ns, snapshots.body);
    auto groups = as(team_a, "GET", "/v1/volumes/group-snapshot" + q);
    ASSERT_EQ(groups.status, 200u) << groups.body;
    expect_nothing_of_team_b("group snapshot list in " + ns, groups.body);
  }
  // Team B's group read by its id: not found, in the very words of a group that does not exist.
  const auto read = [&](const std::string& id) {
    auto r = as(team_a, "GET", "/v1/volumes/group-snapshot/" + id + "?plugin_id=hostpath&namespace=team-a");
    EXPECT_EQ(r.status, 404u) << id << ": " << r.body;
    const auto at = r.body.find(id);
    return at == std::string::npos ? r.body : r.body.replace(at, id.size(), "ID");
  };
  EXPECT_EQ(read(group_b), read("group-that-never-was"));

  // The operator's listing is the plugin's whole listing, the unregistered backend volume included.
  for (const auto* token : {&ops, &mgmt}) {
    auto external = get_as(*token, "/v1/volumes/external?plugin_id=hostpath").dump();
    for (const auto& id : {ext_a, ext_b, ext_orphan}) EXPECT_NE(external.find(id), std::string::npos) << id << external;
    EXPECT_NE(get_as(*token, "/v1/volumes/snapshot?plugin_id=hostpath").dump().find(snap_b), std::string::npos);
    EXPECT_NE(get_as(*token, "/v1/volumes/group-snapshot?plugin_id=hostpath").dump().find(group_b), std::string::npos);
  }
  // A namespace token without the operator rights asks for the whole listing in vain.
  auto orphan = as(team_a, "GET", "/v1/volumes/external?plugin_id=hostpath&namespace=team-a");
  EXPECT_EQ(orphan.body.find(ext_orphan), std::string::npos) << orphan.body;
}

TEST_F(Tenancy, CloneRestoreAndDeletesOfAnotherNamespacesObjectsAreRefusedAndChangeNothing) {
  const auto creates_before = cluster->calls("node-1", "CreateVolume").size();
  struct Case {
    std::string id;
    json source;
    std::string right;  // what the refusal names
  };
  for (const auto& c : std::vector<Case>{{"by-external-id", {{"CloneID", ext_b}}, "csi-read-volume"},
                                         {"by-mooring-id", {{"CloneID", "secret-b"}}, "operator:write"},
                                         {"by-unregistered-id", {{"CloneID", ext_orphan}}, "operator:write"},
                                         {"by-snapshot", {{"SnapshotID", snap_b}}, "csi-read-volume"}}) {
    auto r = create_in(team_a, "team-a", c.id, c.source);
    EXPECT_EQ(r.status, 403u) << c.id << ": " << r.body;
    EXPECT_NE(r.body.find(c.right), std::string::npos) << c.id << ": " << r.body;
    expect_nothing_of_team_b(c.id, r.body);
    EXPECT_EQ(as(mgmt, "GET", "/v1/volume/csi/" + c.id + "?namespace=team-a").status, 404u) << c.id;
  }
  EXPECT_EQ(cluster->calls("node-1", "CreateVolume").size(), creates_before) << "a refused create reached the plugin";

  auto del = as(team_a, "DELETE", "/v1/volumes/snapshot?plugin_id=hostpath&namespace=team-a&snapshot_id=" + snap_b);
  EXPECT_EQ(del.status, 403u) << del.body;
  EXPECT_NE(del.body.find("csi-write-volume"), std::string::npos) << del.body;
  expect_nothing_of_team_b("snapshot delete", del.body);
  auto del_group = as(team_a, "DELETE",
                      "/v1/volumes/group-snapshot?plugin_id=hostpath&namespace=team-a&group_snapshot_id=" + group_b);
  EXPECT_EQ(del_group.status, 403u) << del_group.body;
  expect_nothing_of_team_b("group snapshot delete", del_group.body);
  EXPECT_TRUE(cluster->calls("node-1", "DeleteSnapshot").empty());
  EXPECT_TRUE(cluster->calls("node-1", "DeleteVolumeGroupSnapshot").empty());
  // Both are still there.
  EXPECT_NE(get_as(mgmt, "/v1/volumes/snapshot?plugin_id=hostpath").dump().find(snap_b), std::string::npos);
  EXPECT_NE(get_as(mgmt, "/v1/volumes/group-snapshot?plugin_id=hostpath").dump().find(group_b), std::string::npos);

  // The same entries work for what the caller may read: team A's own volume by either id, its
  // own snapshot, and, for the management token, team B's volume by its external id.
  ASSERT_EQ(create_in(team_a, "team-a", "mine").status, 200u);
  const auto ext_a = external_id("team-a", "mine");
  EXPECT_EQ(create_in(team_a, "team-a", "copy-by-id", {{"CloneID", "mine"}}).status, 200u);
  EXPECT_EQ(create_in(team_a, "team-a", "copy-by-ext", {{"CloneID", ext_a}}).status, 200u);
  json snap = {{"Snapshots", {{{"SourceVolumeID", "mine"}, {"Name", "mine-1"}}}}};
  auto s = as(team_a, "PUT", "/v1/volumes/snapshot?namespace=team-a", snap.dump());
  ASSERT_EQ(s.status, 200u) << s.body;
  const auto snap_a = json::parse(s.body)["Snapshots"][0].value("ID", "");
  EXPECT_EQ(create_in(team_a, "team-a", "restored", {{"SnapshotID", snap_a}}).status, 200u);
  EXPECT_EQ(create_in(team_a, "team-a", "restored-by-name", {{"SnapshotID", "mine-1"}}).status, 200u);
  auto own_del = as(team_a, "DELETE", "/v1/volumes/snapshot?plugin_id=hostpath&namespace=team-a&snapshot_id=" + snap_a);
  EXPECT_EQ(own_del.status, 200u) << own_del.body;
  auto across = create_in(mgmt, "team-a", "from-b", {{"CloneID", ext_b}});
  EXPECT_EQ(across.status, 200u) << across.body;
}

TEST_F(Tenancy, ARegistrationOfAnotherNamespacesBackendVolumeIsRefusedNamingNothingOfIt) {
  json body = volume_body("steal", {{"ExternalID", ext_b}});
  auto r = as(team_a, "PUT", "/v1/volume/csi/steal?namespace=team-a", body.dump());
  EXPECT_EQ(r.status, 409u) << r.body;
  expect_nothing_of_team_b("409", r.body);
  EXPECT_EQ(as(mgmt, "GET", "/v1/volume/csi/steal?namespace=team-a").status, 404u);
  // A caller who may read team B is told which volume holds it.
  auto told = as(mgmt, "PUT", "/v1/volume/csi/steal?namespace=team-a", body.dump());
  EXPECT_EQ(told.status, 409u) << told.body;
  EXPECT_NE(told.body.find("secret-b"), std::string::npos) << told.body;
}

}  // namespace
}  // namespace mooring::e2e
