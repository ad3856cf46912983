// Claims as objects end to end with the real binaries, ACLs on: the list filters (volume, node,
// allocation, namespace, state) with the step each release is at; a namespace token sees only its
// namespace's claims and reaches another's by no id it hands in; releasing one claim needs
// operator:write, is refused while its allocation runs on a live node, and on a node that is gone
// runs the release in order (node step skipped, the allocation lost, then the controller's, which
// waits for a reachable controller) until the claim is freed. Root only.
#include <gtest/gtest.h>

#include <thread>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;
using Headers = std::map<std::string, std::string>;

class Claims : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>(ClusterOptions{.acl = true});
    cluster->start_controlplane();
    auto boot = cluster->request("POST", "/v1/acl/bootstrap");
    ASSERT_EQ(boot.status, 200u) << boot.body;
    cluster->use_token(json::parse(boot.body)["SecretID"]);
    ASSERT_TRUE(cluster->create_namespace("team-a"));  // a write into an unknown namespace is refused
    ASSERT_TRUE(cluster->create_namespace("team-b"));
    team_a = cluster->client_token("team-a", {{"Namespace", {{"team-a", {{"Policy", "write"}}}}}});
    cluster->start_node("node-1");
    for (const char* ns : {"team-a", "team-b"}) {
      json body = {
          {"Volumes",
           {{{"ID", "vol"},
             {"PluginID", "hostpath"},
             {"RequestedCapacityMin", 1 << 20},
             {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
      auto made = cluster->request("PUT", std::string("/v1/volume/csi/vol/create?namespace=") + ns, body.dump());
      ASSERT_EQ(made.status, 200u) << made.body;
      auto sub = cluster->request("POST", std::string("/v1/allocations?namespace=") + ns,
                                  json{{"Allocation", allocation("holder", "vol", "node-1", "sleep 600")}}.dump());
      ASSERT_EQ(sub.status, 200u) << sub.body;
      allocs[ns] = json::parse(sub.body).value("ID", "");
    }
    ASSERT_TRUE(Cluster::eventually([&] { return list("*").size() == 2; })) << list("*").dump();
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }
  HttpResult as(const std::string& secret, const std::string& method, const std::string& target) {
    return cluster->request(method, target, {}, Headers{{"X-Mooring-Token", secret}});
  }
  json list(const std::string& ns, const std::string& filters = {}) {
    return cluster->get("/v1/volumes/claims?namespace=" + ns + filters);
  }
  std::string claim_id(const std::string& ns) { return "vol:" + allocs.at(ns); }
  // Another claim on a down node, left as it was by a release of this one. Its own allocation is
  // lost with the node, so the node-loss monitor may already have begun its release: that one
  // waits for the node, never past it while the node is down.
  void expect_untouched_while_the_node_is_down(const std::string& ns) {
    const auto claims = list(ns);
    ASSERT_EQ(claims.size(), 1u) << claims.dump();
    const auto& c = claims.at(0);
    EXPECT_TRUE(c.value("State", "") == "taken" ||
                (c.value("State", "") == "unpublishing" && c.value("ReleaseStep", "") == "wait-for-node"))
        << c.dump();
  }

  std::unique_ptr<Cluster> cluster;
  std::string team_a;
  std::map<std::string, std::string> allocs;
};

TEST_F(Claims, TheListFiltersAndShowsTheStepEachReleaseIsAt) {
  auto all = list("*");
  ASSERT_EQ(all.size(), 2u) << all.dump();
  for (const auto& c : all) {
    EXPECT_EQ(c.value("State", ""), "taken");
    EXPECT_EQ(c.value("ReleaseStep", ""), "in-use");
    EXPECT_EQ(c.value("ID", ""), "vol:" + c.value("AllocationID", ""));
  }
  EXPECT_EQ(list("team-a").size(), 1u);
  EXPECT_EQ(list("*", "&node=node-1").size(), 2u);
  EXPECT_EQ(list("*", "&node=node-9").size(), 0u);
  EXPECT_EQ(list("*", "&allocation=" + allocs["team-b"]).at(0).value("Namespace", ""), "team-b");
  EXPECT_EQ(list("*", "&volume=vol&state=taken").size(), 2u);
  EXPECT_EQ(list("*", "&state=node-detached").size(), 0u);
  EXPECT_EQ(cluster->request("GET", "/v1/volumes/claims?state=gone").status, 400u);
  auto one = cluster->get("/v1/volumes/claim/" + claim_id("team-a") + "?namespace=team-a");
  EXPECT_EQ(one.value("AllocationID", ""), allocs["team-a"]);
  EXPECT_EQ(one.value("NodeID", ""), "node-1");
  EXPECT_EQ(cluster->request("GET", "/v1/volumes/claim/vol?namespace=team-a").status, 400u);
}

TEST_F(Claims, ANamespaceTokenSeesAndReachesOnlyItsOwnClaims) {
  auto mine = as(team_a, "GET", "/v1/volumes/claims?namespace=*");
  ASSERT_EQ(mine.status, 200u) << mine.body;
  auto items = json::parse(mine.body);
  ASSERT_EQ(items.size(), 1u) << mine.body;
  EXPECT_EQ(items[0].value("Namespace", ""), "team-a");
  EXPECT_EQ(as(team_a, "GET", "/v1/volumes/claims?namespace=team-b").status, 403u);
  // Team B's claim by its id: through team B's namespace (403), or asked for in team A's (404).
  EXPECT_EQ(as(team_a, "GET", "/v1/volumes/claim/" + claim_id("team-b") + "?namespace=team-b").status, 403u);
  EXPECT_EQ(as(team_a, "GET", "/v1/volumes/claim/" + claim_id("team-b") + "?namespace=team-a").status, 404u);
  // Releasing a claim is the operator's, even of one's own namespace.
  auto release = as(team_a, "DELETE", "/v1/volumes/claim/" + claim_id("team-a") + "?namespace=team-a");
  EXPECT_EQ(release.status, 403u) << release.body;
  EXPECT_NE(release.body.find("operator:write"), std::string::npos) << release.body;
  EXPECT_EQ(list("team-a").at(0).value("State", ""), "taken");
}

TEST_F(Claims, ReleasingAClaimOfALostNodeRunsTheReleaseUntilItIsFreed) {
  const auto target = "/v1/volumes/claim/" + claim_id("team-a") + "?namespace=team-a";
  auto running = cluster->request("DELETE", target);
  EXPECT_EQ(running.status, 409u) << running.body;
  EXPECT_NE(running.body.find(allocs["team-a"]), std::string::npos) << running.body;
  EXPECT_EQ(list("team-a").at(0).value("State", ""), "taken");

  cluster->kill_node("node-1");
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->get("/v1/node/node-1").value("Status", "") == "down"; }));
  std::this_thread::sleep_for(1s);  // without stop_after_client_disconnect the claim waits for the node
  EXPECT_EQ(list("team-a").at(0).value("State", ""), "taken");
  auto released = cluster->request("DELETE", target);
  ASSERT_EQ(released.status, 200u) << released.body;
  auto answer = json::parse(released.body);
  if (answer.contains("Claim")) {
    EXPECT_NE(answer["Claim"].value("State", ""), "taken") << released.body;
  }
  // The node step is skipped (the node is gone); the controller's cannot run while the only
  // controller is on that node: the claim waits there, never freed while the volume may still be
  // published to the node.
  ASSERT_TRUE(Cluster::eventually([&] {
    auto c = list("team-a");
    return c.size() == 1 && c[0].value("ReleaseStep", "") == "unpublish-controller" &&
           c[0].value("State", "") == "node-detached";
  })) << list("team-a").dump();
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(list("team-a").size(), 1u) << list("team-a").dump();
  EXPECT_EQ(cluster->get("/v1/allocation/" + allocs["team-a"] + "?namespace=team-a").value("ClientStatus", ""), "lost");
  // The other claim on the node is left as it was by this release. (Once the node is back, its
  // lost allocation's claim is released too, on its own: no later check can tell the two apart.)
  expect_untouched_while_the_node_is_down("team-b");
  // The node (and so its controller) back: the release runs to its end.
  cluster->start_node("node-1");
  EXPECT_TRUE(Cluster::eventually([&] { return list("team-a").empty(); }, 30s)) << list("team-a").dump();
  bool event = false;
  for (const auto& e : cluster->get("/v1/events?namespace=team-a"))
    event |= e.value("Type", "") == "VolumeClaimReleaseRequested";
  EXPECT_TRUE(event);
}

// `mooring volume claim list|delete`, the real CLI against the real control plane: the list with
// its filters, a filter that matches nothing, a bad state named, a delete refused while the
// allocation runs, and on a lost node a delete that starts the release in order.
TEST_F(Claims, TheCliListsClaimsAndReleasesOneOfALostNode) {
  auto all = cluster->cli({"-namespace", "*", "volume", "claim", "list", "-volume", "vol"});
  ASSERT_EQ(all.code, 0) << all.output;
  for (const char* ns : {"team-a", "team-b"}) {
    EXPECT_NE(all.output.find(claim_id(ns)), std::string::npos) << all.output;
    EXPECT_NE(all.output.find(ns), std::string::npos) << all.output;
  }
  EXPECT_NE(all.output.find("taken"), std::string::npos) << all.output;
  EXPECT_NE(all.output.find("in-use"), std::string::npos) << all.output;
  auto one = cluster->cli({"-namespace", "*", "volume", "claim", "list", "-allocation", allocs["team-b"]});
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_EQ(one.output.find(claim_id("team-a")), std::string::npos) << one.output;
  EXPECT_NE(one.output.find(claim_id("team-b")), std::string::npos) << one.output;
  auto none = cluster->cli({"-namespace", "team-a", "volume", "claim", "list", "-state", "ready-to-free"});
  EXPECT_EQ(none.code, 0) << none.output;
  EXPECT_NE(none.output.find("No claims"), std::string::npos) << none.output;
  auto bad = cluster->cli({"volume", "claim", "list", "-state", "gone"});
  EXPECT_NE(bad.code, 0) << bad.output;
  EXPECT_NE(bad.output.find("gone"), std::string::npos) << bad.output;

  auto running = cluster->cli({"-namespace", "team-a", "volume", "claim", "delete", claim_id("team-a")});
  EXPECT_NE(running.code, 0) << running.output;
  EXPECT_NE(running.output.find(allocs["team-a"]), std::string::npos) << running.output;
  EXPECT_EQ(list("team-a").at(0).value("State", ""), "taken");

  cluster->kill_node("node-1");
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->get("/v1/node/node-1").value("Status", "") == "down"; }));
  auto released = cluster->cli({"-namespace", "team-a", "volume", "claim", "delete", claim_id("team-a")});
  ASSERT_EQ(released.code, 0) << released.output;
  EXPECT_NE(released.output.find(claim_id("team-a")), std::string::npos) << released.output;
  // The node step skipped, the claim waits at the controller's (its only controller is on the
  // lost node), as the list says; team-b's claim is left as it was.
  ASSERT_TRUE(Cluster::eventually([&] {
    auto c = cluster->cli({"-namespace", "team-a", "volume", "claim", "list"});
    return c.output.find("node-detached") != std::string::npos &&
           c.output.find("unpublish-controller") != std::string::npos;
  }));
  expect_untouched_while_the_node_is_down("team-b");
}

}  // namespace
}  // namespace mooring::e2e
