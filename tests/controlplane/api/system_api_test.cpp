// System allocations and plugin updates over the API: a submit places one copy per matching ready
// node (none is fine), the group shows its copies, ?system_id= lists them, stopping the group
// stops every copy in one commit, stopping a node plugin that still serves mounted volumes warns,
// and PUT with a new task validates and starts a rolling update.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/http_client.hpp"

namespace mooring::controlplane {
namespace {

using json = nlohmann::json;

json parse(const HttpResult& r) { return json::parse(r.body, nullptr, false); }

domain::Node named_node(const std::string& id, const std::string& name,
                        domain::NodeStatus status = domain::NodeStatus::ready) {
  domain::Node n;
  n.id = id;
  n.name = name;
  n.address = "127.0.0.1:1";
  n.status = status;
  return n;
}

json system_body(json selector = nullptr, json task = nullptr) {
  json a = {{"Name", "agent"}, {"System", true},
            {"Task", task.is_null() ? json{{"Command", "/bin/sleep"}, {"Args", {"600"}}} : task}};
  if (!selector.is_null()) a["NodeSelector"] = selector;
  return {{"Allocation", a}};
}

json plugin_task(const std::string& version, const std::string& id = "hostpath") {
  return {{"Command", "mooring-hostpath"},
          {"Args", {"--version=" + version}},
          {"CSIPlugin", {{"ID", id}, {"Type", "node"}, {"HealthTimeout", "5s"}}}};
}

class SystemApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Batch b;
    b.put(named_node("n1", "worker-1"));
    b.put(named_node("n2", "worker-2"));
    b.put(named_node("n3", "db-1"));
    b.put(named_node("n4", "worker-4", domain::NodeStatus::down));
    server.seed(std::move(b));
    server.start();
  }

  HttpResult call(const std::string& method, const std::string& target, const std::string& body = {}) {
    return http_request(server.port, method, target, body);
  }

  std::pair<std::uint64_t, std::size_t> fingerprint() {
    server.settle();
    return server.on_io([this] { return std::make_pair(server.store.index(), server.backend.transactions.size()); });
  }

  ApiServer server;
};

TEST_F(SystemApiTest, SubmitPlacesACopyOnEveryReadyMatchingNodeAndTheGroupShowsThem) {
  auto r = call("POST", "/v1/allocations", system_body({{"name", "worker-*"}}).dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  auto out = parse(r);
  std::string group = out["ID"];
  ASSERT_EQ(out["Copies"].size(), 2u);  // n3 does not match, n4 is down
  EXPECT_EQ(out["Copies"][0]["NodeID"], "n1");
  EXPECT_EQ(out["Copies"][1]["NodeID"], "n2");

  auto got = parse(call("GET", "/v1/allocation/" + group));
  EXPECT_EQ(got["System"], true);
  EXPECT_EQ(got["NodeID"], "");
  ASSERT_EQ(got["Copies"].size(), 2u);
  EXPECT_EQ(got["Copies"][0]["AllocID"], out["Copies"][0]["AllocID"]);
  EXPECT_EQ(got["Copies"][0]["ClientStatus"], "pending");
  EXPECT_EQ(got["Copies"][0]["Restarts"], 0);

  auto copy = parse(call("GET", "/v1/allocation/" + std::string(out["Copies"][0]["AllocID"])));
  EXPECT_EQ(copy["SystemID"], group);
  EXPECT_EQ(copy["NodeID"], "n1");
  EXPECT_EQ(copy["Task"]["Command"], "/bin/sleep");

  auto listed = parse(call("GET", "/v1/allocations?system_id=" + group));
  EXPECT_EQ(listed.size(), 2u);
  for (const auto& c : listed) EXPECT_EQ(c["SystemID"], group);
  EXPECT_EQ(parse(call("GET", "/v1/allocations")).size(), 3u);  // the group and its copies
  // The group itself is on no node: no agent's watch sees it.
  EXPECT_EQ(parse(call("GET", "/v1/allocations?node_id=n1")).size(), 1u);
}

TEST_F(SystemApiTest, NoEligibleNodeIsFineTheCopiesFollowAsNodesJoin) {
  auto r = call("POST", "/v1/allocations", system_body({{"name", "gpu-*"}}).dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(parse(r)["Copies"].size(), 0u);
  EXPECT_NE(std::string(parse(r)["Message"]).find("no eligible node yet"), std::string::npos);
}

TEST_F(SystemApiTest, BadSystemSubmitsGet400NamingTheFieldAndChangeNothing) {
  auto before = fingerprint();
  auto with_node = system_body();
  with_node["Allocation"]["NodeID"] = "n1";
  auto r = call("POST", "/v1/allocations", with_node.dump());
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("NodeID"), std::string::npos) << r.body;
  json selector_only = {{"Allocation", {{"Name", "x"}, {"NodeSelector", {{"name", "a"}}}}}};
  r = call("POST", "/v1/allocations", selector_only.dump());
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("NodeSelector"), std::string::npos) << r.body;
  r = call("POST", "/v1/allocations", system_body({{"zone", ""}}).dump());
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("NodeSelector.zone"), std::string::npos) << r.body;
  EXPECT_EQ(fingerprint(), before);
}

TEST_F(SystemApiTest, StoppingTheGroupStopsEveryCopyInOneCommitAndAStoppedCopyStaysStopped) {
  auto out = parse(call("POST", "/v1/allocations", system_body().dump()));
  std::string group = out["ID"];
  ASSERT_EQ(out["Copies"].size(), 3u);
  // Stopping one copy: only it, and the group remembers that it was on purpose.
  std::string first = out["Copies"][0]["AllocID"];
  ASSERT_EQ(call("POST", "/v1/allocation/" + first + "/stop").status, 200u);
  auto got = parse(call("GET", "/v1/allocation/" + group));
  EXPECT_EQ(got["DesiredStatus"], "run");
  EXPECT_EQ(got["Copies"][0]["Stopped"], true);
  EXPECT_EQ(got["Copies"][0]["DesiredStatus"], "stop");
  EXPECT_EQ(got["Copies"][1]["DesiredStatus"], "run");

  auto before = fingerprint();
  auto r = call("POST", "/v1/allocation/" + group + "/stop");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(parse(r)["StoppedCopies"], 2);
  auto after = fingerprint();
  EXPECT_EQ(after.second, before.second + 1);  // one transaction
  for (const auto& c : parse(call("GET", "/v1/allocations?system_id=" + group))) EXPECT_EQ(c["DesiredStatus"], "stop");
  got = parse(call("GET", "/v1/allocation/" + group));
  EXPECT_EQ(got["DesiredStatus"], "stop");
  EXPECT_EQ(got["ClientStatus"], "complete");  // the group itself ran nothing
}

TEST_F(SystemApiTest, StoppingANodePluginThatStillServesMountedVolumesWarnsNamingThem) {
  auto out = parse(call("POST", "/v1/allocations", system_body({{"name", "worker-1"}}, plugin_task("1")).dump()));
  std::string group = out["ID"];
  std::string copy = out["Copies"][0]["AllocID"];
  server.on_io([&] {
    Batch b;
    for (std::string id : {"vol-b", "vol-a"}) {
      auto v = fixtures::volume(id);
      v.claims["user"] = fixtures::claim("user", "n1", domain::ClaimState::taken);
      b.put(v);
    }
    auto other = fixtures::volume("vol-elsewhere");
    other.claims["user2"] = fixtures::claim("user2", "n2", domain::ClaimState::taken);
    b.put(other);
    auto foreign = fixtures::volume("vol-other-plugin", "nfs");
    foreign.claims["user3"] = fixtures::claim("user3", "n1", domain::ClaimState::taken);
    b.put(foreign);
    return static_cast<bool>(server.store.commit(std::move(b)));
  });
  auto r = call("POST", "/v1/allocation/" + group + "/stop");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto warnings = parse(r)["Warnings"];
  ASSERT_EQ(warnings.size(), 1u) << r.body;
  EXPECT_EQ(warnings[0], "plugin \"hostpath\" on node \"n1\" still serves mounted volumes: vol-a, vol-b; "
                         "their unmounts wait for a new instance");
  // A plain allocation warns nothing.
  auto plain = parse(call("POST", "/v1/allocations", system_body({{"name", "worker-1"}}).dump()));
  r = call("POST", "/v1/allocation/" + std::string(plain["ID"]) + "/stop");
  EXPECT_FALSE(parse(r).contains("Warnings")) << r.body;
}

TEST_F(SystemApiTest, UpdateValidatesTheTaskAndStartsARollout) {
  auto plain = parse(call("POST", "/v1/allocations", system_body().dump()));
  auto plugin = parse(call("POST", "/v1/allocations", system_body({{"name", "worker-*"}}, plugin_task("1")).dump()));
  std::string group = plugin["ID"];
  auto before = fingerprint();
  struct Case {
    std::string id;
    json body;
    std::string mentions;
  } cases[] = {
      {plain["ID"], {{"Task", plugin_task("2")}}, "only plugin allocations"},
      {group, {{"Task", {{"Command", "x"}}}}, "Task.CSIPlugin"},
      {group, {{"Task", plugin_task("2", "other")}}, "Task.CSIPlugin.ID"},
      {group, {{"Task", {{"Command", ""}, {"CSIPlugin", {{"ID", "hostpath"}}}}}}, "Command"},
      {group, {{"Tusk", plugin_task("2")}}, "Tusk"},
      {plugin["Copies"][0]["AllocID"], {{"Task", plugin_task("2")}}, "update the group"},
  };
  for (const auto& c : cases) {
    auto r = call("PUT", "/v1/allocation/" + c.id, c.body.dump());
    EXPECT_EQ(r.status, 400u) << c.body.dump() << " -> " << r.body;
    EXPECT_NE(r.body.find(c.mentions), std::string::npos) << r.body;
  }
  EXPECT_EQ(fingerprint(), before);

  auto r = call("PUT", "/v1/allocation/" + group, json{{"Task", plugin_task("2")}}.dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  auto rollout = parse(r)["Rollout"];
  EXPECT_EQ(rollout["Status"], "running");
  EXPECT_EQ(rollout["Version"], 1);
  ASSERT_EQ(rollout["Nodes"].size(), 2u);
  EXPECT_EQ(rollout["Nodes"][0]["NodeID"], "n1");
  EXPECT_EQ(rollout["Nodes"][0]["State"], "pending");
  auto got = parse(call("GET", "/v1/allocation/" + group));
  EXPECT_EQ(got["Task"]["Args"][0], "--version=2");
  EXPECT_EQ(got["Rollout"]["Nodes"][1]["OldAllocID"], plugin["Copies"][1]["AllocID"]);
  // A second update while one runs: 409.
  EXPECT_EQ(call("PUT", "/v1/allocation/" + group, json{{"Task", plugin_task("3")}}.dump()).status, 409u);
}

TEST_F(SystemApiTest, ASinglePluginAllocationGetsItsReplacementBesideItOnItsNode) {
  json single = {{"Allocation", {{"Name", "plugin"}, {"NodeID", "n2"}, {"Task", plugin_task("1")}}}};
  std::string id = parse(call("POST", "/v1/allocations", single.dump()))["ID"];
  auto r = call("PUT", "/v1/allocation/" + id, json{{"Task", plugin_task("2")}}.dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  std::string fresh = parse(r)["NewID"];
  ASSERT_FALSE(fresh.empty());
  auto got = parse(call("GET", "/v1/allocation/" + fresh));
  EXPECT_EQ(got["NodeID"], "n2");
  EXPECT_EQ(got["Task"]["Args"][0], "--version=2");
  auto old = parse(call("GET", "/v1/allocation/" + id));
  EXPECT_EQ(old["DesiredStatus"], "run");  // until the new instance is healthy
  EXPECT_EQ(old["Rollout"]["Nodes"][0]["State"], "starting");
  EXPECT_EQ(old["Rollout"]["Nodes"][0]["NewAllocID"], fresh);
}

TEST_F(SystemApiTest, AGroupAndItsCopiesLiveInTheNamespaceItWasSubmittedTo) {
  ASSERT_EQ(call("PUT", "/v1/namespace/team-a", "{}").status, 200u);  // namespaces are made first
  auto r = call("POST", "/v1/allocations?namespace=team-a", system_body({{"name", "worker-1"}}).dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  std::string group = parse(r)["ID"];
  std::string copy = parse(r)["Copies"][0]["AllocID"];
  EXPECT_EQ(call("GET", "/v1/allocation/" + group).status, 404u);
  EXPECT_EQ(call("GET", "/v1/allocation/" + copy).status, 404u);
  EXPECT_EQ(parse(call("GET", "/v1/allocations?system_id=" + group)).size(), 0u);
  EXPECT_EQ(parse(call("GET", "/v1/allocations?namespace=team-a&system_id=" + group)).size(), 1u);
  EXPECT_EQ(parse(call("GET", "/v1/allocation/" + copy + "?namespace=team-a"))["Namespace"], "team-a");
  EXPECT_EQ(call("POST", "/v1/allocation/" + group + "/stop").status, 404u);
  EXPECT_EQ(call("POST", "/v1/allocation/" + group + "/stop?namespace=team-a").status, 200u);
}

}  // namespace
}  // namespace mooring::controlplane
