// CSI plugins that run as allocations (issue 27, the agent side) on the real binaries: agents
// configured with no plugin at all, mooring-hostpath submitted as an allocation with a CSIPlugin
// block. A volume's whole lifecycle through it; a plugin that never becomes healthy; seed 000
// end to end (the node plugin's allocation stopped while a volume is mounted, then redeployed).
// Root only (bind mounts).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <thread>

#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class PluginAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    cluster->start_controlplane();
    // The binary's default drain (none): (d) pins that a plugin task outlives an agent's SIGTERM
    // and is re-adopted. The teardown then stops the tasks left running without failing.
    cluster->start_node("n1", NodeOptions{.agent_args = {"--drain-on-shutdown", "0"}, .configured_plugin = false});
  }

  // n1's instance of the hostpath plugin as the control plane shows it; null when none.
  json instance() {
    auto r = cluster->request("GET", "/v1/plugin/csi/hostpath");
    if (r.status != 200) return nullptr;
    auto j = json::parse(r.body, nullptr, false);
    if (!j.is_object() || !j.contains("Nodes") || !j["Nodes"].is_object() || !j["Nodes"].contains("n1")) return nullptr;
    return j["Nodes"]["n1"];
  }
  bool healthy_instance_of(const std::string& alloc_id) {
    auto i = instance();
    return i.is_object() && i.value("Healthy", false) && i.value("AllocID", "") == alloc_id;
  }
  std::string claim_field(const std::string& volume, const std::string& field) {
    auto v = cluster->volume(volume);
    if (!v.is_object() || !v["Claims"].is_array() || v["Claims"].empty()) return {};
    const auto& f = v["Claims"][0][field];
    return f.is_string() ? f.get<std::string>() : f.is_null() ? std::string() : f.dump();
  }
  std::string events_of(const std::string& alloc_id) {
    std::string out;
    auto a = cluster->get("/v1/allocation/" + alloc_id);
    if (a.is_object() && a["Events"].is_array())
      for (const auto& e : a["Events"]) out += e.value("Type", "") + ": " + e.value("Message", "") + "\n";
    return out;
  }
  std::string logs() { return cluster ? cluster->log_tails() : std::string(); }

  std::unique_ptr<Cluster> cluster;
};

// (a) The plugin runs as an allocation: healthy, shown with its AllocID, and a volume is created,
// claimed by another allocation, mounted, written, released and freed through it.
TEST_F(PluginAllocations, AHostpathPluginRunAsAnAllocationServesAVolumesWholeLifecycle) {
  const auto plugin = cluster->run_plugin_alloc("n1");
  ASSERT_FALSE(plugin.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return healthy_instance_of(plugin); }, 30s)) << instance().dump() << logs();
  EXPECT_EQ(cluster->alloc_status(plugin), "running");
  // The socket is in the allocation's directory, or (this temp dir is deep) in the agent's short one.
  const auto agent_dir = cluster->node_dir("n1") / "agent";
  auto is_socket = [](const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  };
  EXPECT_TRUE(is_socket(agent_dir / "allocs" / plugin / "csi" / "csi.sock") || is_socket(agent_dir / "ps" / plugin / "csi.sock"));
  EXPECT_NE(events_of(plugin).find("PluginHealthy"), std::string::npos) << events_of(plugin);

  ASSERT_FALSE(cluster->create_volume("data").is_null()) << logs();
  const auto user = cluster->run_alloc(
      allocation("user", "data", "n1", "echo through-a-plugin-allocation > \"$MOORING_VOLUME_DATA/greeting\"; exec sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(user) == "running"; })) << logs();
  std::string written;
  ASSERT_TRUE(Cluster::eventually([&] {
    for (const auto& m : cluster->mounts_of("n1"))
      if (fs::exists(fs::path(m) / "greeting")) written = test::read_file(fs::path(m) / "greeting");
    return !written.empty();
  }, 10s)) << logs();
  EXPECT_EQ(written, "through-a-plugin-allocation\n");
  const auto published = cluster->calls("n1", "NodePublishVolume");
  ASSERT_FALSE(published.empty());
  EXPECT_EQ(published.back().code, "OK");

  ASSERT_EQ(cluster->stop_alloc(user).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->claim_count("data") == 0; }, 20s)) << cluster->volume("data").dump();
  EXPECT_TRUE(cluster->mounts_of("n1").empty());
  EXPECT_FALSE(cluster->calls("n1", "NodeUnpublishVolume").empty());

  // No volume needs it any more: stopping the plugin allocation deregisters its instance.
  ASSERT_EQ(cluster->stop_alloc(plugin).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return instance().is_null(); }, 20s)) << instance().dump();
  EXPECT_EQ(cluster->alloc_status(plugin), "complete");
}

// (b) A plugin task that never creates its socket fails after HealthTimeout, saying why.
TEST_F(PluginAllocations, APluginAllocationThatNeverBecomesHealthyFailsAfterItsHealthTimeout) {
  json task = {{"Command", "/bin/sh"},
               {"Args", {"-c", "exec sleep 600"}},
               {"KillTimeout", "2s"},
               {"CSIPlugin", {{"ID", "never"}, {"Type", "node"}, {"HealthTimeout", "2s"}}}};
  const auto t0 = std::chrono::steady_clock::now();
  const auto id = cluster->run_alloc({{"Name", "never-healthy"}, {"NodeID", "n1"}, {"Task", task}});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "failed"; }, 20s)) << events_of(id) << logs();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 2s);
  EXPECT_LT(took, 8s);
  const auto events = events_of(id);
  EXPECT_NE(events.find("plugin did not become healthy within 2s: plugin socket "), std::string::npos) << events;
  EXPECT_NE(events.find("did not appear"), std::string::npos) << events;
  EXPECT_NE(events.find("Killed"), std::string::npos) << events;
}

// (c) Seed 000 end to end: the node plugin's allocation stops while a volume is mounted, then the
// allocation using the volume stops. The unmount waits (the claim says why), the plugin is
// redeployed as a new allocation, and the unmount completes within a second of the new instance
// being healthy; the claim is freed.
TEST_F(PluginAllocations, AStoppedPluginAllocationsVolumeIsReleasedWhenTheRedeployedPluginIsHealthy) {
  const auto first = cluster->run_plugin_alloc("n1");
  ASSERT_TRUE(Cluster::eventually([&] { return healthy_instance_of(first); }, 30s)) << logs();
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  const auto user = cluster->run_alloc(allocation("user", "vol", "n1", "exec sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(user) == "running"; })) << logs();
  ASSERT_FALSE(cluster->mounts_of("n1").empty());

  // The plugin allocation stops: its instance stays listed, unhealthy, naming the waiting volume.
  ASSERT_EQ(cluster->stop_alloc(first).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] {
    auto i = instance();
    return i.is_object() && !i.value("Healthy", true) &&
           i.value("HealthDescription", "") == "plugin allocation stopped; 1 volume waiting";
  }, 20s)) << instance().dump() << logs();
  EXPECT_EQ(instance().value("AllocID", ""), first);

  // The user stops: its unmount waits for a plugin, and the claim shows why.
  ASSERT_EQ(cluster->stop_alloc(user).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return !claim_field("vol", "LastError").empty(); }, 20s))
      << cluster->volume("vol").dump() << logs();
  EXPECT_FALSE(claim_field("vol", "NextAttempt").empty()) << cluster->volume("vol").dump();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(cluster->claim_count("vol"), 1u);
  EXPECT_FALSE(cluster->mounts_of("n1").empty()) << "nothing can unmount without the plugin";

  // Redeployed as a new allocation: the waiting unmount runs the moment it is healthy.
  const auto second = cluster->run_plugin_alloc("n1");
  ASSERT_TRUE(Cluster::eventually([&] { return healthy_instance_of(second); }, 30s)) << instance().dump() << logs();
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->claim_count("vol") == 0; }, 20s)) << cluster->volume("vol").dump();
  EXPECT_TRUE(cluster->mounts_of("n1").empty());

  // Timestamps from the plugin's call log: the new process's first NodeGetInfo ends the agent's
  // first fingerprint of it (the moment it is healthy); its NodeUnpublishVolume follows within 1 s.
  const auto calls = cluster->calls("n1");
  std::int64_t old_pid = 0, healthy_ms = 0, unpublished_ms = 0;
  for (const auto& c : calls)
    if (c.rpc == "NodePublishVolume" && old_pid == 0) old_pid = c.pid;  // the first plugin process mounted
  for (const auto& c : calls) {
    if (c.pid == old_pid || c.code != "OK") continue;
    if (c.rpc == "NodeGetInfo" && healthy_ms == 0) healthy_ms = c.unix_ms;
    if (c.rpc == "NodeUnpublishVolume" && unpublished_ms == 0) unpublished_ms = c.unix_ms;
  }
  ASSERT_GT(healthy_ms, 0);
  ASSERT_GT(unpublished_ms, 0);
  EXPECT_LT(unpublished_ms - healthy_ms, 1000) << "healthy at " << healthy_ms << ", unpublished at " << unpublished_ms;
  EXPECT_GE(unpublished_ms, healthy_ms);

  // The stale instance is gone; the new one serves.
  EXPECT_TRUE(healthy_instance_of(second)) << instance().dump();
  ASSERT_EQ(cluster->stop_alloc(second).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return instance().is_null(); }, 20s)) << instance().dump();
}

// (d) An agent restart leaves the plugin task running: the new agent re-adopts it, supervises it
// again (healthy, same allocation, same process) and releases a volume through it.
TEST_F(PluginAllocations, AfterAnAgentRestartTheRunningPluginTaskIsReadoptedAndServesAgain) {
  const auto plugin = cluster->run_plugin_alloc("n1");
  ASSERT_TRUE(Cluster::eventually([&] { return healthy_instance_of(plugin); }, 30s)) << logs();
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  const auto user = cluster->run_alloc(allocation("user", "vol", "n1", "exec sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(user) == "running"; })) << logs();
  const auto pids = cluster->plugin_pids("n1");
  ASSERT_EQ(pids.size(), 1u);

  cluster->stop_node("n1");
  EXPECT_EQ(cluster->plugin_pids("n1"), pids) << "an agent restart does not stop its allocations' tasks";
  cluster->start_node("n1");
  ASSERT_TRUE(Cluster::eventually([&] { return healthy_instance_of(plugin); }, 30s)) << instance().dump() << logs();
  EXPECT_EQ(cluster->plugin_pids("n1"), pids);
  EXPECT_NE(events_of(plugin).find("Reattached"), std::string::npos) << events_of(plugin);
  EXPECT_EQ(cluster->alloc_status(plugin), "running");

  ASSERT_EQ(cluster->stop_alloc(user).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->claim_count("vol") == 0; }, 20s)) << cluster->volume("vol").dump();
  EXPECT_TRUE(cluster->mounts_of("n1").empty());
  ASSERT_EQ(cluster->stop_alloc(plugin).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return instance().is_null(); }, 20s)) << instance().dump();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->plugin_pids("n1").empty(); }, 10s));
}

}  // namespace
}  // namespace mooring::e2e
