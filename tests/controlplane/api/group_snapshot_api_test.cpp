// /v1/volumes/group-snapshot over real sockets: create, list, read and delete through a scripted
// controller; bad input and volumes that cannot form one group are refused naming the volume,
// change nothing and ask no plugin; secrets reach the plugin and never an answer.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/http_client.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;

namespace {

::csi::v1::VolumeGroupSnapshot group(const std::string& id) {
  ::csi::v1::VolumeGroupSnapshot g;
  g.set_group_snapshot_id(id);
  g.set_ready_to_use(true);
  *g.add_snapshots() = FakeController::ready_snapshot("snap-a", "ext-a", id);
  *g.add_snapshots() = FakeController::ready_snapshot("snap-b", "ext-b", id);
  return g;
}

json parse(const HttpResult& r) { return json::parse(r.body, nullptr, false); }

}  // namespace

class GroupSnapshotApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Batch b;
    auto plugin = fixtures::plugin("hostpath", "node-1", /*controller=*/true);
    for (auto& [id, inst] : plugin.controllers)
      inst.controller_info->supports_group_snapshot = inst.controller_info->supports_list_snapshots = true;
    domain::Node n;
    n.id = "node-1";
    n.status = domain::NodeStatus::ready;
    fixtures::put_running(b, {plugin, fixtures::plugin("other", "node-1", true)}, nullptr, {n});
    b.put(fixtures::volume("a"));
    b.put(fixtures::volume("b"));
    b.put(fixtures::volume("c", "other"));
    auto foreign = fixtures::volume("d");
    foreign.ns = "team-b";
    b.put(foreign);
    server.seed(std::move(b));
    server.start();
  }

  HttpResult call(const std::string& method, const std::string& target, const std::string& body = {},
                  const std::map<std::string, std::string>& headers = {}) {
    return http_request(server.port, method, target, body, headers);
  }
  std::pair<std::uint64_t, std::size_t> fingerprint() {
    server.settle();
    return server.on_io([this] { return std::make_pair(server.store.index(), server.backend.transactions.size()); });
  }
  static std::string body(const json& volumes, const std::string& plugin = "") {
    json g = {{"Name", "nightly"}, {"SourceVolumeIDs", volumes}, {"Secrets", {{"token", "s3cr3t-token"}}}};
    if (!plugin.empty()) g["PluginID"] = plugin;
    return json{{"GroupSnapshot", g}}.dump();
  }
  void list_members() {
    ::csi::v1::ListSnapshotsResponse page;
    const auto members = group("group-1");  // named: a range-for does not keep a temporary's parts alive
    for (const auto& s : members.snapshots()) *page.add_entries()->mutable_snapshot() = s;
    server.on_io([&] {
      server.controller.snapshot_lists.script.push_back(FakeController::ok(page));
      return 0;
    });
  }

  ApiServer server;
};

TEST_F(GroupSnapshotApiTest, CreateAnswersTheGroupWithItsMembersAndNeverItsSecrets) {
  ::csi::v1::CreateVolumeGroupSnapshotResponse made;
  *made.mutable_group_snapshot() = group("group-1");
  server.on_io([&] {
    server.controller.group_creates.script.push_back(FakeController::ok(made));
    return 0;
  });
  auto r = call("PUT", "/v1/volumes/group-snapshot", body({"a", "b"}), {{"X-Mooring-CSI-Secrets", "header=h1"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body.find("s3cr3t-token"), std::string::npos);
  EXPECT_EQ(r.body.find("hunter2"), std::string::npos);
  auto g = parse(r)["GroupSnapshot"];
  EXPECT_EQ(g["ID"], "group-1");
  EXPECT_EQ(g["Name"], "nightly");
  EXPECT_EQ(g["PluginID"], "hostpath");
  ASSERT_EQ(g["Snapshots"].size(), 2u);
  EXPECT_EQ(g["Snapshots"][0]["SourceVolumeID"], "a");
  EXPECT_EQ(g["Snapshots"][0]["GroupSnapshotID"], "group-1");
  EXPECT_EQ(g["Snapshots"][1]["SourceVolumeID"], "b");
  auto sent = server.on_io([this] { return server.controller.group_creates.requests.at(0); });
  EXPECT_EQ(sent.secrets().at("token"), "s3cr3t-token");
  EXPECT_EQ(sent.secrets().at("header"), "h1");
  EXPECT_EQ(sent.secrets().at("password"), "hunter2");  // the volumes' own
  EXPECT_EQ(sent.source_volume_ids_size(), 2);
}

TEST_F(GroupSnapshotApiTest, VolumesThatCannotFormOneGroupAreRefusedNamingTheVolume) {
  const auto before = fingerprint();
  struct Case {
    std::string body;
    std::string names;
  };
  for (const auto& c : std::vector<Case>{{body({"a", "c"}), "\"c\""},
                                         {body({"a", "d"}), "\"d\""},
                                         {body({"a", "zz"}), "\"zz\""},
                                         {body({"a", "a"}), "\"a\""},
                                         {body({"c"}, "other"), "\"other\""},
                                         {body(json::array()), "SourceVolumeIDs"},
                                         {R"({"GroupSnapshot":{"SourceVolumeIDs":["a"]}})", "Name"},
                                         {R"({"GroupSnapshot":{"Name":"n","SourceVolumeIDs":["a"],"Bogus":1}})", "Bogus"},
                                         {R"({"Snapshots":[]})", "GroupSnapshot"}}) {
    auto r = call("PUT", "/v1/volumes/group-snapshot", c.body);
    EXPECT_EQ(r.status, 400u) << c.body << " -> " << r.body;
    EXPECT_NE(parse(r)["Error"].get<std::string>().find(c.names), std::string::npos) << r.body;
  }
  EXPECT_EQ(fingerprint(), before);
  EXPECT_TRUE(server.on_io([this] { return server.controller.group_creates.requests.empty(); }));
}

TEST_F(GroupSnapshotApiTest, ListReadAndDeleteFollowThePluginsSnapshots) {
  list_members();
  auto listed = call("GET", "/v1/volumes/group-snapshot?plugin_id=hostpath");
  ASSERT_EQ(listed.status, 200u) << listed.body;
  auto groups = parse(listed)["GroupSnapshots"];
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["ID"], "group-1");
  EXPECT_EQ(groups[0]["Snapshots"].size(), 2u);

  list_members();
  ::csi::v1::GetVolumeGroupSnapshotResponse got;
  *got.mutable_group_snapshot() = group("group-1");
  server.on_io([&] {
    server.controller.group_gets.script.push_back(FakeController::ok(got));
    return 0;
  });
  auto one = call("GET", "/v1/volumes/group-snapshot/group-1?plugin_id=hostpath");
  ASSERT_EQ(one.status, 200u) << one.body;
  EXPECT_EQ(parse(one)["GroupSnapshot"]["Snapshots"][1]["ID"], "snap-b");

  list_members();
  server.on_io([&] {
    server.controller.group_deletes.script.push_back(FakeController::ok(::csi::v1::DeleteVolumeGroupSnapshotResponse{}));
    return 0;
  });
  auto gone = call("DELETE", "/v1/volumes/group-snapshot?plugin_id=hostpath&group_snapshot_id=group-1");
  ASSERT_EQ(gone.status, 200u) << gone.body;
  auto del = server.on_io([this] { return server.controller.group_deletes.requests.at(0); });
  EXPECT_EQ(del.group_snapshot_id(), "group-1");
  EXPECT_EQ(del.snapshot_ids_size(), 2);

  EXPECT_EQ(call("DELETE", "/v1/volumes/group-snapshot?plugin_id=hostpath").status, 400u);
  EXPECT_EQ(call("GET", "/v1/volumes/group-snapshot").status, 400u);
  EXPECT_EQ(call("GET", "/v1/volumes/group-snapshot?plugin_id=nope").status, 404u);
}

}  // namespace mooring::controlplane
