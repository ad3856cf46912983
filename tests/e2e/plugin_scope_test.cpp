// Plugins are cluster-scoped (issue 40), on the real binaries with mutual TLS: a namespace
// token cannot deploy a plugin (403 naming plugin:write, nothing runs); a plugin allocation that
// replaced the configured plugin and stops leaves the configured one serving at once (a create
// right after succeeds, the API shows it healthy); after a control plane kill -9 with the agent
// away, the plugin reads unknown and a create is a retryable 503 until the agent is back.
// Root only (bind mounts).
#include <gtest/gtest.h>

#include <thread>

#include "tests/e2e/cluster.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kUnknown = "unknown until the node's agent is heard from";

json create_body(const std::string& id) {
  return {{"Volumes",
           {{{"ID", id},
             {"Name", id},
             {"PluginID", "hostpath"},
             {"RequestedCapacityMin", 1 << 20},
             {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
}

class PluginScope : public ::testing::Test {
 protected:
  void start(ClusterOptions options) {
    cluster = std::make_unique<Cluster>(std::move(options));
    cluster->start_controlplane();
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails(8000);
  }
  // n1's instance of the hostpath plugin as GET /v1/plugin/csi/hostpath shows it; null when none.
  json instance() {
    auto p = plugin();
    return p.is_object() && p["Nodes"].is_object() && p["Nodes"].contains("n1") ? p["Nodes"]["n1"] : json();
  }
  json plugin() {
    auto r = cluster->request("GET", "/v1/plugin/csi/hostpath");
    return r.status == 200 ? json::parse(r.body, nullptr, false) : json();
  }
  HttpResult create(const std::string& id) {
    return cluster->request("PUT", "/v1/volume/csi/" + id + "/create", create_body(id).dump());
  }

  std::unique_ptr<Cluster> cluster;
};

// The hole: submit-alloc on team-a was enough to run a task with CSIPlugin "hostpath", whose
// instance then served (and received the secrets of) every namespace.
TEST_F(PluginScope, ANamespaceTokensCSIPluginSubmitIsRefused403NamingPluginWriteAndChangesNothing) {
  MOORING_REQUIRE_ROOT();
  start({.mutual_tls = true, .acl = true});
  auto boot = cluster->request("POST", "/v1/acl/bootstrap");
  ASSERT_EQ(boot.status, 200u) << boot.body;
  const std::string mgmt = json::parse(boot.body)["SecretID"];
  cluster->use_token(mgmt);
  cluster->start_node("n1");
  ASSERT_TRUE(cluster->create_namespace("team-a"));
  ASSERT_EQ(cluster->request("PUT", "/v1/acl/policy/team-a",
                             R"({"Rules":{"Namespace":{"team-a":{"Policy":"write"}},"Plugin":"read"}})")
                .status,
            200u);
  auto tok = cluster->request("PUT", "/v1/acl/token", R"({"Name":"team-a","Type":"client","Policies":["team-a"]})");
  ASSERT_EQ(tok.status, 200u) << tok.body;
  const std::string team = json::parse(tok.body)["SecretID"];
  const auto allocations_before = cluster->get("/v1/allocations?namespace=*");
  const auto pids_before = cluster->plugin_pids("n1");
  ASSERT_EQ(pids_before.size(), 1u);

  cluster->use_token(team);
  const json rogue = {{"Name", "rogue-hostpath"}, {"NodeID", "n1"}, {"Task", cluster->plugin_task("n1")}};
  json everywhere = rogue;
  everywhere.erase("NodeID");
  everywhere["System"] = true;
  for (const auto& alloc : {rogue, everywhere}) {
    auto r = cluster->request("POST", "/v1/allocations?namespace=team-a", json{{"Allocation", alloc}}.dump());
    EXPECT_EQ(r.status, 403u) << r.body;
    EXPECT_NE(r.body.find("lacks plugin:write"), std::string::npos) << r.body;
  }
  // The same token may run tasks in its namespace: the refusal is about the plugin.
  auto plain = cluster->request("POST", "/v1/allocations?namespace=team-a",
                                json{{"Allocation", {{"Name", "job"}, {"NodeID", "n1"},
                                                     {"Task", {{"Command", "/bin/true"}}}}}}.dump());
  EXPECT_EQ(plain.status, 200u) << plain.body;

  cluster->use_token(mgmt);
  const auto allocations_after = cluster->get("/v1/allocations?namespace=*");
  EXPECT_EQ(allocations_after.size(), allocations_before.size() + 1) << allocations_after.dump();
  for (const auto& a : allocations_after) EXPECT_NE(a.value("Name", ""), "rogue-hostpath") << a.dump();
  std::this_thread::sleep_for(1s);  // what a submit would have started by now
  EXPECT_EQ(cluster->plugin_pids("n1"), pids_before) << "no second plugin process";
  const auto i = instance();
  EXPECT_TRUE(i.value("Healthy", false)) << i.dump();
  EXPECT_EQ(i.value("AllocID", ""), "") << "the configured plugin still serves";
}

// The second half of the hole: after the plugin allocation that had replaced the configured
// plugin stopped, the agent kept the dead instance registered; every CreateVolume answered 503
// "plugin hostpath not running on node" for minutes while the API said healthy. Volumes are
// mounted through the plugin meanwhile (the case that used to keep the dead instance).
TEST_F(PluginScope, AStoppedPluginAllocationLeavesThePluginHealthyAndServingThroughTheConfiguredInstance) {
  MOORING_REQUIRE_ROOT();
  start({.mutual_tls = true});
  cluster->start_node("n1");
  ASSERT_FALSE(cluster->create_volume("before").is_null());
  const auto user = cluster->run_alloc(allocation("user", "before", "n1", "exec sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(user) == "running"; })) << cluster->log_tails();

  // Another copy of hostpath as an allocation, on a backend of its own (as an attacker's would
  // be): its instance replaces the configured one on n1.
  json task = cluster->plugin_task("n1");
  for (std::size_t a = 0; a + 1 < task["Args"].size(); ++a) {
    if (task["Args"][a] == "--data-dir") task["Args"][a + 1] = (cluster->dir() / "hostpath-other").string();
    if (task["Args"][a] == "--call-log") task["Args"][a + 1] = (cluster->dir() / "calls-other.jsonl").string();
  }
  const auto other = cluster->run_alloc({{"Name", "other-hostpath"}, {"NodeID", "n1"}, {"Task", task}});
  ASSERT_FALSE(other.empty());
  ASSERT_TRUE(Cluster::eventually([&] {
    auto i = instance();
    return i.value("AllocID", "") == other && i.value("Healthy", false);
  }, 30s)) << instance().dump();

  ASSERT_EQ(cluster->stop_alloc(other).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(other) == "complete"; }, 20s));
  // Right after the stop: one create, no retry.
  auto r = create("after");
  EXPECT_EQ(r.status, 200u) << r.body;
  // The agent reports the fallback on its next heartbeat (sent early on the change, at most one per
  // 200 ms), so the API may still name the ended allocation for that long; it must not stay so.
  EXPECT_TRUE(Cluster::eventually([&] {
    const auto i = instance();
    return i.value("Healthy", false) && i.value("AllocID", "") == "";
  }, 5s)) << instance().dump();
  EXPECT_EQ(plugin().value("ControllersHealthy", 0), 1) << plugin().dump();

  // The volume mounted before is released through the configured instance.
  ASSERT_EQ(cluster->stop_alloc(user).status, 200u);
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->claim_count("before") == 0; }, 20s))
      << cluster->volume("before").dump();
  EXPECT_TRUE(cluster->mounts_of("n1").empty());
}

// Health that is not there: a control plane killed -9 and started again while the agent is away
// showed the plugin healthy from its stored state, and a create answered "Connection refused",
// then "has no controller that supports CREATE_DELETE_VOLUME". Now: unknown until the agent is
// heard from, a 503 with Retry-After that says so, and the create succeeds once it is back.
TEST_F(PluginScope, AfterAControlPlaneRestartWithoutTheAgentThePluginReadsUnknownAndCreatesAreRetryable) {
  MOORING_REQUIRE_ROOT();
  start({.mutual_tls = true});
  cluster->start_node("n1");
  ASSERT_FALSE(cluster->create_volume("first").is_null());

  cluster->kill_controlplane();
  cluster->stop_node("n1");  // the agent cannot tell the dead control plane anything
  cluster->start_controlplane();

  auto p = plugin();
  ASSERT_TRUE(p.is_object());
  EXPECT_EQ(p.value("NodesHealthy", -1), 0) << p.dump();
  EXPECT_EQ(p.value("ControllersHealthy", -1), 0) << p.dump();
  for (const auto* map : {"Nodes", "Controllers"}) {
    const auto& inst = p[map]["n1"];
    EXPECT_FALSE(inst.value("Healthy", true)) << map << " " << inst.dump();
    EXPECT_NE(inst.value("HealthDescription", "").find(kUnknown), std::string::npos) << map << " " << inst.dump();
  }
  bool listed = false;
  for (const auto& stub : cluster->get("/v1/plugins")) {
    if (stub.value("ID", "") != "hostpath") continue;
    listed = true;
    EXPECT_EQ(stub.value("NodesHealthy", -1), 0) << stub.dump();
    EXPECT_EQ(stub.value("ControllersHealthy", -1), 0) << stub.dump();
  }
  EXPECT_TRUE(listed);

  auto r = create("second");
  EXPECT_EQ(r.status, 503u) << r.body;
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_NE(r.body.find("not known yet"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("onnection refused"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("CREATE_DELETE_VOLUME"), std::string::npos) << r.body;

  // The agent comes back: every answer until the create succeeds is a 503 with Retry-After,
  // never a refusal that sends the user elsewhere.
  cluster->start_node("n1", {}, /*wait_healthy=*/false);
  std::vector<std::string> refusals;
  ASSERT_TRUE(Cluster::eventually([&] {
    r = create("second");
    if (r.status == 200) return true;
    if (r.status != 503 || r.header("retry-after").empty()) refusals.push_back(std::to_string(r.status) + " " + r.body);
    return false;
  }, 30s)) << r.status << " " << r.body;
  EXPECT_TRUE(refusals.empty()) << testing::PrintToString(refusals);
  EXPECT_TRUE(instance().value("Healthy", false)) << instance().dump();
}

}  // namespace
}  // namespace mooring::e2e
