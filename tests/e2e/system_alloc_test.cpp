// System allocations end to end with the real binaries: a plain task submitted with "System": true
// runs one copy on each of three agents, a fourth agent that joins gets its copy within seconds
// (the control plane's system reconciler, woken by the node's registration, after a control
// plane crash and restart), and stopping the group stops all four copies; a plugin group is
// upgraded under 20 mounted volumes without unmounting one. Root only (the agents mount as root).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "tests/e2e/cluster.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

class SystemAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    cluster->start_controlplane();
    for (const auto* id : {"node-1", "node-2", "node-3"}) cluster->start_node(id);
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();  // stops every process and removes the temp dir, on failure too
  }

  bool all_copies(const std::string& group, std::size_t count, const std::string& status) {
    auto copies = cluster->system_copies(group);
    if (copies.size() != count) return false;
    for (const auto& [node, c] : copies)
      if (c.value("ClientStatus", "") != status) return false;
    return true;
  }

  std::unique_ptr<Cluster> cluster;
};

TEST_F(SystemAllocations, EveryAgentRunsACopyAJoiningAgentGetsOneAndStoppingTheGroupStopsThemAll) {
  auto r = cluster->request("POST", "/v1/allocations",
                            json{{"Allocation", {{"Name", "everywhere"}, {"System", true},
                                                 {"Task", {{"Command", "/bin/sleep"}, {"Args", {"600"}}}}}}}
                                .dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  auto submitted = json::parse(r.body);
  std::string group = submitted["ID"];
  EXPECT_EQ(submitted["Copies"].size(), 3u);
  EXPECT_TRUE(Cluster::eventually([&] { return all_copies(group, 3, "running"); }))
      << cluster->get("/v1/allocations?system_id=" + group).dump();

  // A control plane that crashed and came back resumes the group from its state.
  cluster->kill_controlplane();
  cluster->start_controlplane();
  cluster->start_node("node-4");
  const auto joined = std::chrono::steady_clock::now();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->system_copies(group).contains("node-4"); }, 5s))
      << cluster->get("/v1/allocation/" + group).dump();
  EXPECT_LT(std::chrono::steady_clock::now() - joined, 5s);
  EXPECT_TRUE(Cluster::eventually([&] { return all_copies(group, 4, "running"); }))
      << cluster->get("/v1/allocations?system_id=" + group).dump();
  auto view = cluster->get("/v1/allocation/" + group);
  EXPECT_EQ(view["Copies"].size(), 4u) << view.dump();

  auto stop = cluster->stop_alloc(group);
  ASSERT_EQ(stop.status, 200u) << stop.body;
  EXPECT_EQ(json::parse(stop.body)["StoppedCopies"], 4);
  EXPECT_TRUE(Cluster::eventually([&] {
    auto list = cluster->get("/v1/allocations?system_id=" + group);
    if (list.size() != 4) return false;
    for (const auto& c : list)
      if (c["DesiredStatus"] != "stop" || c["ClientStatus"] != "complete") return false;
    return true;
  })) << cluster->get("/v1/allocations?system_id=" + group).dump();
  // No copy comes back while the group is stopped.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(cluster->get("/v1/allocations?system_id=" + group).size(), 4u);
}

// A copy whose task fails is replaced on its node, with the node's backoff (1 s, then 2 s, ...):
// the group's view counts the restarts and shows when the next one is due.
TEST_F(SystemAllocations, AFailingCopyIsReplacedOnItsNodeWithBackoff) {
  auto r = cluster->request("POST", "/v1/allocations",
                            json{{"Allocation", {{"Name", "crashing"}, {"System", true}, {"NodeSelector", {{"id", "node-1"}}},
                                                 {"Task", {{"Command", "/bin/sh"}, {"Args", {"-c", "exit 3"}}}}}}}
                                .dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  std::string group = json::parse(r.body)["ID"];
  EXPECT_EQ(json::parse(r.body)["Copies"].size(), 1u);
  EXPECT_TRUE(Cluster::eventually(
      [&] {
        auto copies = cluster->get("/v1/allocation/" + group)["Copies"];
        return copies.size() == 1 && copies[0].value("Restarts", 0) >= 2;
      },
      20s))
      << cluster->get("/v1/allocation/" + group).dump();
  auto listed = cluster->get("/v1/allocations?system_id=" + group);
  EXPECT_GE(listed.size(), 3u);
  for (const auto& c : listed) EXPECT_EQ(c["NodeID"], "node-1");
  ASSERT_EQ(cluster->stop_alloc(group).status, 200u);
}

// A plugin deployed as a system allocation on agents that have no configured plugin: one copy per
// agent, each with its own CSI node id (${node.name} is filled in on each node) and call log,
// each reported with the AllocID that runs it. Then 20 volumes are mounted across the three nodes
// and the plugin is upgraded (PUT with a new vendor version). The new copy starts beside the old
// one and takes over the node's state when the old one has drained and exited (hostpath's
// takeover): no volume is unmounted, no claim changes state, no CSI call fails, every node's
// instance reports the new version, and the old processes are gone.
class SystemPluginUpgrade : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    cluster->start_controlplane();
    // Volume stats polled often: node calls keep flowing to the plugin through the upgrade.
    for (const auto* id : kNodes)
      cluster->start_node(id, NodeOptions{.agent_args = {"--volume-stats-interval", "300ms"}, .configured_plugin = false});
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }
  // The task every node runs: the cluster's hostpath flags (data dir, CSI node id, call log) with
  // the node's name filled in by its agent.
  json task(const std::string& version) const {
    const auto dir = cluster->dir().string();
    return {{"Command", test::binary_path("mooring-hostpath").string()},
            {"Args", {"--data-dir", dir + "/hostpath", "--node-id", "csi-${node.name}", "--call-log",
                      dir + "/calls-${node.name}.jsonl", "--known-nodes", "*", "--vendor-version", version}},
            {"KillTimeout", "5s"},
            {"CSIPlugin", {{"ID", "hostpath"}, {"Type", "monolith"}, {"HealthTimeout", "20s"}}}};
  }
  // The node's instance of the plugin as the control plane shows it (null when none).
  json instance(const std::string& node) {
    auto r = cluster->request("GET", "/v1/plugin/csi/hostpath");
    if (r.status != 200) return nullptr;
    auto plugin = json::parse(r.body, nullptr, false);
    if (!plugin.is_object() || !plugin.contains("Nodes") || !plugin["Nodes"].contains(node)) return nullptr;
    return plugin["Nodes"][node];
  }
  std::string served_by(const std::string& node) {
    auto i = instance(node);
    return i.is_object() && i.value("Healthy", false) ? i.value("AllocID", "") : "";
  }
  // Every claim of the volumes as "alloc node mode state", for comparing before and after.
  std::map<std::string, std::string> claims(const std::vector<std::string>& volumes) {
    std::map<std::string, std::string> out;
    for (const auto& v : volumes) {
      auto vol = cluster->volume(v);
      std::string line;
      if (vol.is_object() && vol["Claims"].is_array())
        for (const auto& c : vol["Claims"])
          line += c.value("AllocationID", "") + " " + c.value("NodeID", "") + " " + c.value("Mode", "") + " " +
                  c.value("State", "") + ";";
      out[v] = line;
    }
    return out;
  }
  static constexpr const char* kNodes[] = {"node-1", "node-2", "node-3"};
  std::unique_ptr<Cluster> cluster;
};

TEST_F(SystemPluginUpgrade, UpgradingThePluginUnderTwentyMountedVolumesUnmountsNothingAndFailsNoCall) {
  auto r = cluster->request("POST", "/v1/allocations",
                            json{{"Allocation", {{"Name", "hostpath-plugin"}, {"System", true}, {"Task", task("1.0.0")}}}}.dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  const std::string group = json::parse(r.body)["ID"];
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        for (const auto* n : kNodes)
          if (served_by(n).empty()) return false;
        return true;
      },
      30s))
      << cluster->get("/v1/plugin/csi/hostpath").dump();
  const auto before = cluster->system_copies(group);
  ASSERT_EQ(before.size(), 3u);
  std::map<std::string, std::vector<pid_t>> old_pids;
  for (const auto& [node, copy] : before) {
    EXPECT_EQ(served_by(node), copy["ID"]) << node;
    EXPECT_EQ(instance(node).value("Version", ""), "1.0.0") << node;
    old_pids[node] = cluster->plugin_pids(node);
    EXPECT_EQ(old_pids[node].size(), 1u) << node;
  }

  // 20 volumes, each claimed and mounted by an allocation that keeps running.
  std::vector<std::string> volumes, users;
  for (int i = 0; i < 20; ++i) {
    const auto v = "vol-" + std::to_string(i);
    ASSERT_FALSE(cluster->create_volume(v).is_null());
    volumes.push_back(v);
    users.push_back(cluster->run_alloc(
        allocation("user-" + std::to_string(i), v, kNodes[i % 3], "echo " + v + " > \"$MOORING_VOLUME_DATA/f\"; exec sleep 600")));
    ASSERT_FALSE(users.back().empty());
  }
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        for (const auto& u : users)
          if (cluster->alloc_status(u) != "running") return false;
        return true;
      },
      90s));
  std::map<std::string, std::vector<std::string>> mounted;
  std::size_t mount_count = 0;
  for (const auto* n : kNodes) {
    mounted[n] = cluster->mounts_of(n);
    std::sort(mounted[n].begin(), mounted[n].end());
    mount_count += mounted[n].size();
  }
  EXPECT_GE(mount_count, 20u) << "a publish mount per volume (and its stage)";
  const auto claims_before = claims(volumes);
  for (const auto& [v, line] : claims_before) EXPECT_NE(line.find(" taken;"), std::string::npos) << v << ": " << line;

  // The upgrade: a new vendor version.
  const auto upgrade_started = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  r = cluster->request("PUT", "/v1/allocation/" + group, json{{"Task", task("2.0.0")}}.dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  std::vector<std::string> claim_changes;
  std::size_t node_calls_during = 0;
  ASSERT_TRUE(Cluster::eventually(
      [&] {
        // Watched all along: a claim that changes state at any moment of the rollout is recorded.
        auto now = claims(volumes);
        for (const auto& [v, line] : now)
          if (line != claims_before.at(v)) claim_changes.push_back(v + ": " + claims_before.at(v) + " -> " + line);
        return cluster->get("/v1/allocation/" + group)["Rollout"].value("Status", "") != "running";
      },
      120s))
      << cluster->get("/v1/allocation/" + group).dump();
  const auto view = cluster->get("/v1/allocation/" + group);
  ASSERT_EQ(view["Rollout"].value("Status", ""), "done") << view.dump();
  EXPECT_TRUE(claim_changes.empty()) << ::testing::PrintToString(claim_changes);

  for (const auto* n : kNodes) {
    // Every node's instance is the new copy, with the new version, and the old process is gone.
    const auto copy = cluster->system_copies(group)[n];
    EXPECT_NE(copy.value("ID", ""), before.at(n).value("ID", "")) << n;
    EXPECT_TRUE(Cluster::eventually([&] { return served_by(n) == copy.value("ID", ""); }, 10s)) << instance(n).dump();
    EXPECT_EQ(instance(n).value("Version", ""), "2.0.0") << n;
    const auto pids = cluster->plugin_pids(n);
    ASSERT_EQ(pids.size(), 1u) << n;
    EXPECT_NE(pids[0], old_pids[n][0]) << n << ": the old copy still runs";
    // Nothing was unmounted: the same mounts, and no unpublish or unstage reached a plugin.
    auto now = cluster->mounts_of(n);
    std::sort(now.begin(), now.end());
    EXPECT_EQ(now, mounted[n]) << n;
    std::int64_t longest_hold = 0;
    std::size_t calls_during = 0;
    for (const auto& c : cluster->calls(n)) {
      if (c.unix_ms < upgrade_started) continue;
      ++calls_during;
      if (c.rpc == "NodeGetVolumeStats") ++node_calls_during;
      longest_hold = std::max(longest_hold, c.held_ms);
      EXPECT_EQ(c.code, "OK") << n << ": " << c.rpc << " " << c.volume_id << " failed during the upgrade";
      EXPECT_TRUE(c.rpc != "NodeUnpublishVolume" && c.rpc != "NodeUnstageVolume") << n << ": " << c.rpc << " " << c.volume_id;
    }
    std::cout << n << ": " << calls_during << " CSI calls during the upgrade, none failed; longest held " << longest_hold
              << " ms\n";
  }
  for (const auto& u : users) EXPECT_EQ(cluster->alloc_status(u), "running") << u;
  EXPECT_GT(node_calls_during, 0u) << "node calls flowed through the upgrade";

  // The new copies took over the node state the old ones recorded: a release goes through them.
  ASSERT_EQ(cluster->stop_alloc(users[0]).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->claim_count(volumes[0]) == 0; }, 30s))
      << cluster->volume(volumes[0]).dump();
  const auto unpublished = cluster->calls(kNodes[0], "NodeUnpublishVolume");
  ASSERT_FALSE(unpublished.empty());
  EXPECT_EQ(unpublished.back().code, "OK");
  EXPECT_EQ(unpublished.back().pid, cluster->plugin_pids(kNodes[0]).front());
}

}  // namespace
}  // namespace mooring::e2e
