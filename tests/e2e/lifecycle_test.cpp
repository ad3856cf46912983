// End-to-end scenarios with the real binaries: control plane, node agents, hostpath plugins, real
// bind mounts. Each asserts the end state: claims, the mount table, the order of plugin calls and
// what the API shows. Root only (bind mounts).
#include <gtest/gtest.h>

#include <signal.h>

#include <future>
#include <thread>

#include "tests/e2e/cluster.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::e2e {
namespace {

using namespace std::chrono_literals;

class Lifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    cluster = std::make_unique<Cluster>();
    cluster->start_controlplane();
    cluster->start_node("node-1");
    cluster->start_node("node-2");
  }
  void TearDown() override {
    if (HasFailure() && cluster) std::cerr << cluster->log_tails();
    cluster.reset();
  }

  bool freed(const std::string& volume) {
    return Cluster::eventually([&] { return cluster->claim_count(volume) == 0; });
  }
  std::string claim_field(const std::string& volume, const std::string& field) {
    auto v = cluster->volume(volume);
    if (!v.is_object() || !v.contains("Claims") || v["Claims"].empty()) return "";
    return v["Claims"][0].value(field, "");
  }

  std::unique_ptr<Cluster> cluster;
};

// Create a volume, write to it from one node, stop, see every mount gone and the claim freed with
// the node's unpublish/unstage strictly before the controller's unpublish; read it back on another node.
TEST_F(Lifecycle, WriteOnOneNodeReadOnAnotherAndEverythingIsReleasedInOrder) {
  ASSERT_FALSE(cluster->create_volume("shared").is_null());
  auto writer = cluster->run_alloc(allocation("writer", "shared", "node-1",
                                              "echo hello-from-node-1 > \"$MOORING_VOLUME_DATA/greeting\"; sleep 600"));
  ASSERT_FALSE(writer.empty());
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(writer) == "running"; }));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").size() >= 1; }));
  auto v = cluster->volume("shared");
  ASSERT_EQ(v["Claims"].size(), 1u);
  EXPECT_EQ(v["Claims"][0]["State"], "taken");
  EXPECT_EQ(v["AccessMode"], "single-node-writer");
  EXPECT_FALSE(v.contains("Secrets"));
  // ControllerPublish named the CSI node id, not ours (seed 001).
  auto publishes = cluster->calls("node-1", "ControllerPublishVolume");
  auto publishes2 = cluster->calls("node-2", "ControllerPublishVolume");
  publishes.insert(publishes.end(), publishes2.begin(), publishes2.end());
  ASSERT_EQ(publishes.size(), 1u);
  EXPECT_EQ(publishes[0].node_id, "csi-node-1");

  ASSERT_EQ(cluster->stop_alloc(writer).status, 200u);
  ASSERT_TRUE(freed("shared")) << cluster->volume("shared").dump();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").empty(); }));
  EXPECT_TRUE(cluster->mounts_of("node-1").empty());

  // Node side strictly before controller side.
  auto unpublish = cluster->calls("node-1", "NodeUnpublishVolume");
  auto unstage = cluster->calls("node-1", "NodeUnstageVolume");
  std::vector<PluginCall> ctrl;
  for (auto n : {"node-1", "node-2"})
    for (auto& c : cluster->calls(n, "ControllerUnpublishVolume")) ctrl.push_back(c);
  ASSERT_FALSE(unpublish.empty());
  ASSERT_FALSE(unstage.empty());
  ASSERT_EQ(ctrl.size(), 1u);
  EXPECT_EQ(ctrl[0].node_id, "csi-node-1");
  EXPECT_LE(unpublish.back().unix_ms, unstage.back().unix_ms);
  EXPECT_LE(unstage.back().unix_ms, ctrl[0].unix_ms);
  EXPECT_EQ(cluster->volume("shared")["AccessMode"], "");

  auto reader = cluster->run_alloc(allocation("reader", "shared", "node-2",
                                              "test \"$(cat \"$MOORING_VOLUME_DATA/greeting\")\" = hello-from-node-1"));
  ASSERT_FALSE(reader.empty());
  EXPECT_TRUE(Cluster::eventually([&] {
    auto s = cluster->alloc_status(reader);
    return s == "complete" || s == "failed";
  }));
  EXPECT_EQ(cluster->alloc_status(reader), "complete");
  EXPECT_TRUE(freed("shared"));
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-2").empty(); }));
}

// Seed 004: a claim refused while the previous allocation still holds the volume is retried
// until that allocation's release completes.
TEST_F(Lifecycle, ClaimWaitsForThePreviousAllocationToRelease) {
  ASSERT_FALSE(cluster->create_volume("single").is_null());
  auto first = cluster->run_alloc(allocation("first", "single", "node-1", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(first) == "running"; }));
  // While the first runs, a writer on another node cannot be placed: the refusal names the holder.
  auto refused = cluster->request("POST", "/v1/allocations",
                                  json{{"Allocation", allocation("second", "single", "node-2", "sleep 600")}}.dump());
  EXPECT_EQ(refused.status, 409u);
  EXPECT_NE(refused.body.find(first), std::string::npos) << refused.body;

  // Once the first is stopping, the second is placed and its claim waits for the release (slowed
  // down here so the wait is visible), then it runs.
  cluster->set_faults("node-1", json::array({{{"rpc", "NodeUnstageVolume"}, {"delay_ms", 2000}}}));
  ASSERT_EQ(cluster->stop_alloc(first).status, 200u);
  auto second = cluster->run_alloc(allocation("second", "single", "node-2", "sleep 600"));
  ASSERT_FALSE(second.empty());
  std::this_thread::sleep_for(1000ms);
  EXPECT_NE(cluster->alloc_status(second), "running");
  auto held = cluster->volume("single");
  ASSERT_EQ(held["Claims"].size(), 1u);
  EXPECT_EQ(held["Claims"][0]["AllocationID"], first);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(second) == "running"; }))
      << cluster->get("/v1/allocation/" + second).dump();
  auto v = cluster->volume("single");
  ASSERT_EQ(v["Claims"].size(), 1u);
  EXPECT_EQ(v["Claims"][0]["AllocationID"], second);
  EXPECT_TRUE(cluster->mounts_of("node-1").empty());
  ASSERT_EQ(cluster->stop_alloc(second).status, 200u);
  EXPECT_TRUE(freed("single"));
}

// Seed 000: the node plugin is gone when the allocation stops. The release waits, visibly, and
// completes once the plugin is back.
TEST_F(Lifecycle, NodePluginDownAtStopReleasesWhenItReturns) {
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto a = cluster->run_alloc(allocation("a", "vol", "node-1", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  // Every node RPC of node-1's plugin fails for a while, as a crashed plugin would.
  cluster->set_faults("node-1", json::array({{{"rpc", "NodeUnpublishVolume"}, {"code", 14}, {"for_seconds", 4}}}));
  ASSERT_EQ(cluster->stop_alloc(a).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return !claim_field("vol", "LastError").empty(); }, 20s))
      << cluster->volume("vol").dump();
  auto v = cluster->volume("vol");
  EXPECT_NE(v["Claims"][0]["State"], "taken");
  EXPECT_TRUE(cluster->calls("node-1", "ControllerUnpublishVolume").empty() &&
              cluster->calls("node-2", "ControllerUnpublishVolume").empty())
      << "the controller must not detach while the node still has it mounted";
  // The fault expires: the release completes on its own.
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  EXPECT_TRUE(cluster->mounts_of("node-1").empty());
}

// The chaos run of seed 20261129 (docs/chaos.md), replayed: an allocation stopped while its
// ControllerPublish is still in the plugin. The stop ends the agent's wait for its claim; the
// control plane used to give up the volume's lock with it, and the release's ControllerUnpublish
// overtook the publish: the volume stayed published to the node with no claim, and the next
// publishes were refused. Now the publish runs to its answer, the unpublish follows it, the
// allocation ends stopped (complete, not failed), and the volume is free for the next writer.
TEST_F(Lifecycle, AStopDuringControllerPublishUnpublishesAfterTheAnswerAndFreesTheVolume) {
  ASSERT_FALSE(cluster->create_volume("slow").is_null());
  const std::string external = cluster->volume("slow").value("ExternalID", "");
  ASSERT_FALSE(external.empty());
  const json slow_publish = json::array({{{"rpc", "ControllerPublishVolume"}, {"delay_ms", 3000}, {"count", 1}}});
  for (auto n : {"node-1", "node-2"}) cluster->set_faults(n, slow_publish);  // whichever controller is asked
  auto first = cluster->run_alloc(allocation("first", "slow", "node-1", "sleep 600"));
  ASSERT_FALSE(first.empty());
  std::this_thread::sleep_for(1000ms);  // the publish is in the plugin
  ASSERT_EQ(cluster->stop_alloc(first).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] {
    const auto s = cluster->alloc_status(first);
    return s == "complete" || s == "failed";
  }));
  EXPECT_EQ(cluster->alloc_status(first), "complete");
  EXPECT_TRUE(freed("slow")) << cluster->volume("slow").dump();

  // One node's controller was asked: its log holds the publish answered, then the unpublish.
  std::vector<PluginCall> controller;
  for (auto n : {"node-1", "node-2"})
    for (auto& c : cluster->calls(n))
      if (c.volume_id == external && (c.rpc == "ControllerPublishVolume" || c.rpc == "ControllerUnpublishVolume"))
        controller.push_back(c);
  ASSERT_EQ(controller.size(), 2u);
  EXPECT_EQ(controller[0].rpc, "ControllerPublishVolume");
  EXPECT_EQ(controller[0].code, "OK");
  EXPECT_EQ(controller[1].rpc, "ControllerUnpublishVolume");
  EXPECT_EQ(controller[1].code, "OK");
  EXPECT_LE(controller[0].unix_ms, controller[1].unix_ms);

  // Nothing is left published: the next writer, on the other node, runs, and after it the
  // volume can be deleted (hostpath refuses to delete a volume still published anywhere).
  for (auto n : {"node-1", "node-2"}) cluster->set_faults(n, json::array());
  EXPECT_EQ(cluster->run_task("second", "slow", "node-2", "echo ok > \"$MOORING_VOLUME_DATA/f\""), "complete");
  auto deleted = cluster->request("DELETE", "/v1/volume/csi/slow/delete");
  EXPECT_EQ(deleted.status, 200u) << deleted.body;
  EXPECT_TRUE(cluster->mounts_of("node-1").empty());
  EXPECT_TRUE(cluster->mounts_of("node-2").empty());
}

// The operator's detach frees the claims of a node that is gone.
TEST_F(Lifecycle, OperatorDetachOfALostNodeFreesTheClaim) {
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto a = cluster->run_alloc(allocation("a", "vol", "node-1", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  cluster->kill_node("node-1");
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->get("/v1/node/node-1").value("Status", "") == "down"; }));
  // No stop_after_client_disconnect: the claim waits for the node or the operator.
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(cluster->claim_count("vol"), 1u);
  auto r = cluster->request("DELETE", "/v1/volume/csi/vol/detach?node=node-1");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  EXPECT_EQ(cluster->alloc_status(a), "lost");
}

// Finished allocations do not pile up: once terminal and named by no claim, the control plane
// deletes them after --alloc-gc-threshold, and the agent keeps nothing of them either.
TEST_F(Lifecycle, FinishedAllocationsAreDeletedAfterTheThreshold) {
  cluster.reset();
  cluster = std::make_unique<Cluster>(ClusterOptions{.alloc_gc_threshold = "1s"});
  cluster->start_controlplane();
  cluster->start_node("node-1");
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto a = cluster->run_alloc(allocation("a", "vol", "node-1", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  std::this_thread::sleep_for(1500ms);  // running, even past the threshold: kept
  EXPECT_EQ(cluster->request("GET", "/v1/allocation/" + a).status, 200u);
  ASSERT_EQ(cluster->stop_alloc(a).status, 200u);
  ASSERT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->request("GET", "/v1/allocation/" + a).status == 404; }, 10s))
      << cluster->request("GET", "/v1/allocation/" + a).body;
  bool event = false;
  for (const auto& e : cluster->get("/v1/events")) event |= e.value("Type", "") == "AllocationsCollected";
  EXPECT_TRUE(event);
  auto leftovers = [&] {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(cluster->node_dir("node-1")))
      if (entry.path().string().find(a) != std::string::npos) out.push_back(entry.path().string());
    return out;
  };
  EXPECT_TRUE(Cluster::eventually([&] { return leftovers().empty(); }, 10s)) << leftovers().front();
  // The node carries on: the volume is claimed and mounted again by a new allocation.
  auto b = cluster->run_alloc(allocation("b", "vol", "node-1", "sleep 600"));
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(b) == "running"; }));
}

// Seed 004: a node that loses the control plane, with stop_after_client_disconnect set: both sides
// release on their own — the agent stops the task and unmounts, the control plane frees the claim.
TEST_F(Lifecycle, StopAfterClientDisconnectReleasesBothSidesWithoutAnOperator) {
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto alloc = allocation("a", "vol", "node-1", "sleep 600");
  alloc["StopAfterClientDisconnect"] = "1s";
  auto a = cluster->run_alloc(alloc);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  ASSERT_FALSE(cluster->mounts_of("node-1").empty());
  // The control plane goes away; the agent keeps running on its own.
  cluster->kill_controlplane();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").empty(); }, 30s))
      << "the agent must stop the allocation and unmount once stop_after_client_disconnect passes";
  // Back up: the node's report converges the control plane's view.
  cluster->start_controlplane();
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  // The agent's final status arrives once it reaches the control plane again (within a heartbeat
  // or two: the reconnect wakes its retries).
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "complete"; }, 10s))
      << cluster->alloc_status(a);
}

TEST_F(Lifecycle, NodeLossWithStopAfterClientDisconnectFreesTheClaimAtTheControlPlane) {
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto alloc = allocation("a", "vol", "node-1", "sleep 600");
  alloc["StopAfterClientDisconnect"] = "1s";
  auto a = cluster->run_alloc(alloc);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  cluster->kill_node("node-1");  // gone for good, as far as the control plane can tell
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  EXPECT_EQ(cluster->alloc_status(a), "lost");
  // The controller detached it from node-1's CSI node (node-2 runs the only healthy controller).
  auto ctrl = cluster->calls("node-2", "ControllerUnpublishVolume");
  ASSERT_FALSE(ctrl.empty());
  EXPECT_EQ(ctrl.back().node_id, "csi-node-1");
}

// Control plane kill -9 while a release is failing: after the restart it resumes and completes.
TEST_F(Lifecycle, ControlPlaneKilledMidReleaseResumesAfterRestart) {
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto a = cluster->run_alloc(allocation("a", "vol", "node-1", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  for (auto n : {"node-1", "node-2"})
    cluster->set_faults(n, json::array({{{"rpc", "ControllerUnpublishVolume"}, {"code", 14}}}));
  ASSERT_EQ(cluster->stop_alloc(a).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] {
    return claim_field("vol", "State") == "node-detached" && !claim_field("vol", "LastError").empty();
  })) << cluster->volume("vol").dump();
  cluster->kill_controlplane();
  for (auto n : {"node-1", "node-2"}) cluster->set_faults(n, json::array());
  cluster->start_controlplane();
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
}

// Agent kill -9 while an unmount is stuck; after the restart the unmount completes and nothing leaks.
TEST_F(Lifecycle, AgentKilledMidUnmountFinishesAfterRestart) {
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto a = cluster->run_alloc(allocation("a", "vol", "node-1", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  cluster->set_faults("node-1", json::array({{{"rpc", "NodeUnstageVolume"}, {"code", 14}}}));
  ASSERT_EQ(cluster->stop_alloc(a).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return !cluster->calls("node-1", "NodeUnstageVolume").empty(); }));
  cluster->kill_node("node-1");
  cluster->set_faults("node-1", json::array());
  cluster->start_node("node-1");
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").empty(); }));
}

// Drain mode (`make run`'s Ctrl-C): SIGTERM stops the node's allocations, unmounts their volumes
// and tells the control plane before the agent exits, so the claim is freed with nothing mounted.
TEST_F(Lifecycle, DrainingAgentStopsItsAllocationsAndReleasesTheirVolumesBeforeExiting) {
  NodeOptions drain;
  drain.agent_args = {"--drain-on-shutdown", "15s"};
  cluster->start_node("node-3", drain);
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto a = cluster->run_alloc(allocation("a", "vol", "node-3", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  ASSERT_FALSE(cluster->mounts_of("node-3").empty());
  cluster->stop_node("node-3");
  EXPECT_TRUE(cluster->mounts_of("node-3").empty()) << "the agent exited with volumes mounted";
  EXPECT_EQ(cluster->alloc_status(a), "complete");
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  EXPECT_FALSE(cluster->calls("node-3", "NodeUnstageVolume").empty());
  EXPECT_NE(cluster->node_log("node-3").find("drained"), std::string::npos);
}

// The controller fails for a while (UNAVAILABLE from every controller instance): the node side
// is released at once, the claim waits visibly at node-detached with the error and the next
// attempt, and is freed once the controller answers again.
TEST_F(Lifecycle, ControllerUnreachableThenBackFreesTheClaim) {
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto a = cluster->run_alloc(allocation("a", "vol", "node-1", "sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  const json down = json::array({{{"rpc", "ControllerUnpublishVolume"}, {"code", 14}, {"for_seconds", 4}}});
  for (auto n : {"node-1", "node-2"}) cluster->set_faults(n, down);
  ASSERT_EQ(cluster->stop_alloc(a).status, 200u);
  ASSERT_TRUE(Cluster::eventually(
      [&] { return claim_field("vol", "State") == "node-detached" && !claim_field("vol", "LastError").empty(); }, 10s))
      << cluster->volume("vol").dump();
  EXPECT_NE(claim_field("vol", "LastError").find("ControllerUnpublishVolume"), std::string::npos)
      << claim_field("vol", "LastError");
  EXPECT_FALSE(claim_field("vol", "NextAttempt").empty());
  EXPECT_TRUE(cluster->mounts_of("node-1").empty()) << "the node side does not wait for the controller";
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
}

// The node plugin crashes in the middle of staging: the agent restarts it and the mount is
// retried, so the allocation runs without anyone stepping in, with exactly one set of mounts.
TEST_F(Lifecycle, PluginCrashMidMountIsRetriedAfterTheRestart) {
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  const pid_t before = cluster->plugin_pid("node-1");
  cluster->set_faults("node-1", json::array({{{"rpc", "NodeStageVolume"}, {"exit", true}, {"count", 1}}}));
  auto a = cluster->run_alloc(allocation("a", "vol", "node-1", "echo ok > \"$MOORING_VOLUME_DATA/f\"; sleep 600"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }, 60s))
      << cluster->get("/v1/allocation/" + a).dump();
  EXPECT_NE(cluster->plugin_pid("node-1"), before) << "the plugin was restarted";
  EXPECT_EQ(cluster->mounts_of("node-1").size(), 2u) << "one staging and one publish mount";
  ASSERT_EQ(cluster->stop_alloc(a).status, 200u);
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-1").empty(); }));
}

// Per-alloc volumes: allocations of one name get the volume of their index ("pv[0]", "pv[1]").
TEST_F(Lifecycle, PerAllocVolumesGiveEachAllocationItsOwnVolume) {
  ASSERT_FALSE(cluster->create_volume("pv[0]").is_null());
  ASSERT_FALSE(cluster->create_volume("pv[1]").is_null());
  auto spec = allocation("web", "pv", "", "echo $MOORING_ALLOC_ID > \"$MOORING_VOLUME_DATA/owner\"; sleep 600");
  spec["Volumes"]["data"]["PerAlloc"] = true;
  auto a0 = cluster->run_alloc(spec);
  auto a1 = cluster->run_alloc(spec);
  ASSERT_TRUE(Cluster::eventually(
      [&] { return cluster->alloc_status(a0) == "running" && cluster->alloc_status(a1) == "running"; }));
  auto v0 = cluster->volume("pv[0]");
  auto v1 = cluster->volume("pv[1]");
  ASSERT_EQ(v0["Claims"].size(), 1u);
  ASSERT_EQ(v1["Claims"].size(), 1u);
  EXPECT_EQ(v0["Claims"][0]["AllocationID"], a0);
  EXPECT_EQ(v1["Claims"][0]["AllocationID"], a1);
  // A third one has no volume of its own: refused, naming it.
  auto third = cluster->request("POST", "/v1/allocations", json{{"Allocation", spec}}.dump());
  EXPECT_EQ(third.status, 400u);
  EXPECT_NE(third.body.find("pv[2]"), std::string::npos) << third.body;
  cluster->stop_alloc(a0);
  cluster->stop_alloc(a1);
  EXPECT_TRUE(freed("pv[0]"));
  EXPECT_TRUE(freed("pv[1]"));
}

// A real network partition (the node's own network namespace, its veth pulled): with
// StopAfterClientDisconnect both sides release on their own. The cut-off agent stops the task
// and unmounts; the control plane marks the node down, treats its plugin as abandoned,
// controller-unpublishes through another node and frees the claim, all without an operator. After
// the partition heals, the views agree and nothing is mounted.
TEST_F(Lifecycle, PartitionedNodeWithStopAfterClientDisconnectReleasesOnBothSides) {
  NodeOptions isolated;
  isolated.own_network = true;
  cluster->start_node("node-3", isolated);
  ASSERT_FALSE(cluster->create_volume("vol").is_null());
  auto spec = allocation("a", "vol", "node-3", "sleep 600");
  spec["StopAfterClientDisconnect"] = "2s";
  auto a = cluster->run_alloc(spec);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
  ASSERT_FALSE(cluster->mounts_of("node-3").empty());

  cluster->partition("node-3");
  // Agent side: it cannot reach the control plane, stops the allocation and unmounts.
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->mounts_of("node-3").empty(); }, 30s))
      << "the agent must release on its own";
  // Control plane side: node down, allocation lost, claim freed through another controller,
  // which detached it from node-3's CSI node.
  EXPECT_TRUE(freed("vol")) << cluster->volume("vol").dump();
  EXPECT_EQ(cluster->alloc_status(a), "lost");
  EXPECT_EQ(cluster->get("/v1/node/node-3").value("Status", ""), "down");
  std::vector<PluginCall> ctrl;
  for (auto n : {"node-1", "node-2"})
    for (auto& c : cluster->calls(n, "ControllerUnpublishVolume")) ctrl.push_back(c);
  ASSERT_EQ(ctrl.size(), 1u);
  EXPECT_EQ(ctrl[0].node_id, "csi-node-3");
  EXPECT_TRUE(cluster->calls("node-3", "ControllerUnpublishVolume").empty()) << "node-3 was unreachable";

  cluster->heal("node-3");
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->get("/v1/node/node-3").value("Status", "") == "ready"; }));
  EXPECT_TRUE(cluster->mounts_of("node-3").empty());
  EXPECT_EQ(cluster->claim_count("vol"), 0u);
  // The volume is usable again at once, from the healed node too.
  auto b = cluster->run_alloc(allocation("b", "vol", "node-3", "sleep 600"));
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(b) == "running"; }));
  cluster->stop_alloc(b);
  EXPECT_TRUE(freed("vol"));
}

// Multi-node readers share a volume; a second writer on a single-writer volume is refused until
// the first is gone.
TEST_F(Lifecycle, ReadersShareAMultiReaderVolume) {
  ASSERT_FALSE(cluster->create_volume("ro", "multi-node-reader-only").is_null());
  auto r1 = cluster->run_alloc(allocation("r1", "ro", "node-1", "sleep 600", "multi-node-reader-only", true));
  auto r2 = cluster->run_alloc(allocation("r2", "ro", "node-2", "sleep 600", "multi-node-reader-only", true));
  ASSERT_TRUE(Cluster::eventually(
      [&] { return cluster->alloc_status(r1) == "running" && cluster->alloc_status(r2) == "running"; }));
  EXPECT_EQ(cluster->volume("ro")["ReadAllocs"].size(), 2u);
  cluster->stop_alloc(r1);
  cluster->stop_alloc(r2);
  EXPECT_TRUE(freed("ro"));
}

// A create whose outcome is unknown (DEADLINE_EXCEEDED from every controller) is undone in the
// background by sending the same request again, then DeleteVolume for what it names. The request
// must be the whole one: a plugin refuses a CreateVolume without its capabilities.
TEST_F(Lifecycle, UncertainCreateIsNegatedWithTheSameRequest) {
  for (auto n : {"node-1", "node-2"})
    cluster->set_faults(n, json::array({{{"rpc", "CreateVolume"}, {"code", 4}, {"count", 1}}}));
  json body = {
      {"Volumes",
       {{{"ID", "maybe"},
         {"PluginID", "hostpath"},
         {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
  auto r = cluster->request("PUT", "/v1/volume/csi/maybe/create", body.dump());
  EXPECT_NE(r.status, 200u) << r.body;
  auto negated = [&] {
    bool created = false, deleted = false;
    for (auto n : {"node-1", "node-2"}) {
      for (const auto& c : cluster->calls(n, "CreateVolume")) created |= c.code == "OK";
      for (const auto& c : cluster->calls(n, "DeleteVolume")) deleted |= c.code == "OK";
    }
    return created && deleted;
  };
  EXPECT_TRUE(Cluster::eventually(negated, 20s));
  for (auto n : {"node-1", "node-2"})
    for (const auto& c : cluster->calls(n, "CreateVolume"))
      EXPECT_NE(c.code, "INVALID_ARGUMENT") << "the negation sent an incomplete CreateVolume";
  EXPECT_EQ(cluster->request("GET", "/v1/volume/csi/maybe").status, 404u);
}

TEST_F(Lifecycle, VolumeCreateSnapshotRestoreExpandDeleteThroughTheApi) {
  ASSERT_FALSE(cluster->create_volume("src", "single-node-writer", 1 << 20).is_null());
  auto w = cluster->run_alloc(allocation("w", "src", "node-1", "echo snap-data > \"$MOORING_VOLUME_DATA/f\""));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(w) == "complete"; }));
  ASSERT_TRUE(freed("src"));

  auto snap = cluster->request("PUT", "/v1/volumes/snapshot",
                               json{{"Snapshots", {{{"SourceVolumeID", "src"}, {"Name", "snap-1"}}}}}.dump());
  ASSERT_EQ(snap.status, 200u) << snap.body;
  auto snap_id = json::parse(snap.body)["Snapshots"][0].value("ID", "");
  ASSERT_FALSE(snap_id.empty());
  auto list = cluster->get("/v1/volumes/snapshot?plugin_id=hostpath");
  ASSERT_TRUE(list.is_object());
  EXPECT_EQ(list["Snapshots"].size(), 1u);

  json restore = {
      {"Volumes",
       {{{"ID", "restored"},
         {"PluginID", "hostpath"},
         {"SnapshotID", snap_id},
         {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
  auto r = cluster->request("PUT", "/v1/volume/csi/restored/create", restore.dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  auto check = cluster->run_alloc(
      allocation("check", "restored", "node-2", "test \"$(cat \"$MOORING_VOLUME_DATA/f\")\" = snap-data"));
  ASSERT_TRUE(Cluster::eventually([&] {
    auto s = cluster->alloc_status(check);
    return s == "complete" || s == "failed";
  }));
  EXPECT_EQ(cluster->alloc_status(check), "complete");
  ASSERT_TRUE(freed("restored"));

  // Expand: re-register with a larger minimum.
  auto src = cluster->volume("src");
  json grow = {
      {"Volumes",
       {{{"ID", "src"},
         {"PluginID", "hostpath"},
         {"ExternalID", src["ExternalID"]},
         {"RequestedCapacityMin", 4 << 20},
         {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
  auto g = cluster->request("PUT", "/v1/volume/csi/src", grow.dump());
  ASSERT_EQ(g.status, 200u) << g.body;
  EXPECT_EQ(cluster->volume("src")["Capacity"], 4 << 20);
  bool expanded = !cluster->calls("node-1", "ControllerExpandVolume").empty() ||
                  !cluster->calls("node-2", "ControllerExpandVolume").empty();
  EXPECT_TRUE(expanded);

  auto del = cluster->request("DELETE", "/v1/volumes/snapshot?plugin_id=hostpath&snapshot_id=" + snap_id);
  EXPECT_EQ(del.status, 200u) << del.body;
  for (auto id : {"src", "restored"}) {
    auto d = cluster->request("DELETE", std::string("/v1/volume/csi/") + id + "/delete");
    EXPECT_EQ(d.status, 200u) << d.body;
    EXPECT_EQ(cluster->request("GET", std::string("/v1/volume/csi/") + id).status, 404u);
  }
  auto ext = cluster->get("/v1/volumes/external?plugin_id=hostpath");
  ASSERT_TRUE(ext.is_object());
  EXPECT_TRUE(ext["Volumes"].empty()) << ext.dump();
}

// A plugin whose ControllerExpandVolume asks for node expansion: the control plane grows the
// volume through the controller, then each node that has it published runs NodeExpandVolume (with
// the volume's secrets, under the volume's lock); a retryable failure is retried by the agent, a
// final one is reported to the operator, naming the node.
TEST(Expansion, AVolumeInUseIsExpandedOnTheNodeThatPublishedIt) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster;
  cluster.start_controlplane();
  cluster.start_node("node-1", NodeOptions{.plugin_args = {"--node-expansion-required"}});
  ASSERT_FALSE(cluster.create_volume("grow", "single-node-writer", 1 << 20).is_null());
  json holder = allocation("holder", "grow", "node-1", "sleep 600");
  holder.erase("Task");  // no task: the allocation holds the volume until stopped
  auto id = cluster.run_alloc(holder);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.alloc_status(id) == "running"; }));
  auto grow_to = [&](std::int64_t bytes) {
    auto v = cluster.volume("grow");
    json body = {
        {"Volumes",
         {{{"ID", "grow"},
           {"PluginID", "hostpath"},
           {"ExternalID", v["ExternalID"]},
           {"RequestedCapacityMin", bytes},
           {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}};
    return cluster.request("PUT", "/v1/volume/csi/grow", body.dump());
  };
  cluster.set_faults("node-1", json::array({{{"rpc", "NodeExpandVolume"}, {"code", 14}, {"count", 1}}}));
  auto g = grow_to(4 << 20);
  ASSERT_EQ(g.status, 200u) << g.body;
  EXPECT_EQ(cluster.volume("grow")["Capacity"], 4 << 20);
  auto node_calls = cluster.calls("node-1", "NodeExpandVolume");
  ASSERT_EQ(node_calls.size(), 2u) << "UNAVAILABLE once, then retried by the agent";
  EXPECT_EQ(node_calls[0].code, "UNAVAILABLE");
  EXPECT_EQ(node_calls[1].code, "OK");

  cluster.set_faults("node-1", json::array({{{"rpc", "NodeExpandVolume"}, {"code", 9}}}));  // FAILED_PRECONDITION
  auto refused = grow_to(8 << 20);
  EXPECT_EQ(refused.status, 502u) << refused.body;
  EXPECT_NE(refused.body.find("node expansion failed"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("node-1"), std::string::npos) << refused.body;
  EXPECT_EQ(cluster.calls("node-1", "NodeExpandVolume").size(), 3u) << "a final error is not retried";

  cluster.set_faults("node-1", json::array());
  ASSERT_EQ(cluster.stop_alloc(id).status, 200u);
  EXPECT_TRUE(Cluster::eventually([&] { return cluster.claim_count("grow") == 0; }));
}

// Deregistering a volume whose last allocation stopped while its node plugin could not unmount:
// force is refused (the volume is still mounted there), purge waits for the release and then
// removes the volume, after NodeUnpublish and ControllerUnpublish both succeeded.
TEST_F(Lifecycle, PurgeReleasesEveryClaimBeforeTheVolumeGoes) {
  ASSERT_FALSE(cluster->create_volume("purged").is_null());
  auto id = cluster->run_alloc(allocation("purged", "purged", "node-1", "while true; do sleep 0.1; done"));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "running"; }));
  cluster->set_faults("node-1", json::array({{{"rpc", "NodeUnpublishVolume"}, {"code", 14}, {"for_seconds", 3}}}));
  ASSERT_EQ(cluster->stop_alloc(id).status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(id) == "complete"; }));
  auto forced = cluster->request("DELETE", "/v1/volume/csi/purged?force=true");
  EXPECT_EQ(forced.status, 409u) << forced.body;
  auto purge = cluster->request("DELETE", "/v1/volume/csi/purged?purge=true");
  ASSERT_EQ(purge.status, 202u) << purge.body;
  EXPECT_TRUE(cluster->volume("purged").value("Deregistering", false));
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->request("GET", "/v1/volume/csi/purged").status == 404; }))
      << cluster->volume("purged").dump();
  EXPECT_TRUE(cluster->mounts_of("node-1").empty());
  bool node_ok = false, controller_ok = false;
  for (const auto& c : cluster->calls("node-1", "NodeUnpublishVolume")) node_ok |= c.code == "OK";
  for (auto n : {"node-1", "node-2"})
    for (const auto& c : cluster->calls(n, "ControllerUnpublishVolume")) controller_ok |= c.code == "OK";
  EXPECT_TRUE(node_ok);
  EXPECT_TRUE(controller_ok);
}

// A node that went away for good: while a claim names it, it stays (its release still needs it),
// and once the operator detached the volume it is purged when it has been down past
// --node-gc-threshold, with its plugin instance, so the plugin counts forget it.
TEST(NodeGc, ANodeDownPastTheThresholdIsPurgedOnceNoClaimNamesIt) {
  MOORING_REQUIRE_ROOT();
  Cluster cluster(ClusterOptions{.node_gc_threshold = "3s"});
  cluster.start_controlplane();
  cluster.start_node("node-1");
  cluster.start_node("node-2");
  ASSERT_FALSE(cluster.create_volume("left").is_null());
  json holder = allocation("holder", "left", "node-2", "");
  holder.erase("Task");
  auto id = cluster.run_alloc(holder);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.alloc_status(id) == "running"; }));
  cluster.kill_node("node-2");
  for (const pid_t p : cluster.plugin_pids("node-2")) ::kill(p, SIGKILL);  // the machine is gone
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.get("/v1/node/node-2").value("Status", "") == "down"; }));
  std::this_thread::sleep_for(5s);  // past the threshold
  EXPECT_EQ(cluster.request("GET", "/v1/node/node-2").status, 200u) << "a claim names it: it stays";
  auto purge = cluster.request("DELETE", "/v1/node/node-2");
  EXPECT_EQ(purge.status, 409u) << purge.body;
  EXPECT_NE(purge.body.find("left"), std::string::npos) << purge.body;

  ASSERT_EQ(cluster.stop_alloc(id).status, 200u);
  ASSERT_EQ(cluster.request("DELETE", "/v1/volume/csi/left/detach?node=node-2").status, 200u);
  ASSERT_TRUE(Cluster::eventually([&] { return cluster.claim_count("left") == 0; }));
  EXPECT_TRUE(Cluster::eventually([&] { return cluster.request("GET", "/v1/node/node-2").status == 404; }, 20s))
      << "purged by the node GC";
  auto plugin = cluster.get("/v1/plugin/csi/hostpath");
  EXPECT_EQ(plugin.value("NodesExpected", 0), 1) << plugin.dump();
  EXPECT_FALSE(plugin["Nodes"].contains("node-2"));
  EXPECT_EQ(cluster.request("DELETE", "/v1/node/node-2").status, 404u);
}

// Several snapshots in one request are answered per item: one that fails does not hide the one
// created, and the answer's status is the failure's.
TEST_F(Lifecycle, SnapshotsInOneRequestAreAnsweredPerItem) {
  ASSERT_FALSE(cluster->create_volume("snap-a").is_null());
  ASSERT_FALSE(cluster->create_volume("snap-b").is_null());
  for (auto n : {"node-1", "node-2"})
    cluster->set_faults(n, json::array({{{"rpc", "CreateSnapshot"}, {"code", 9}, {"count", 1}}}));
  auto r = cluster->request(
      "PUT", "/v1/volumes/snapshot",
      json{{"Snapshots",
            {{{"SourceVolumeID", "snap-a"}, {"Name", "first"}}, {{"SourceVolumeID", "snap-b"}, {"Name", "second"}}}}}
          .dump());
  EXPECT_GE(r.status, 400u) << r.body;
  auto body = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r.body;
  EXPECT_NE(body.value("Error", "").find("1 of 2 snapshots failed"), std::string::npos) << r.body;
  ASSERT_EQ(body["Snapshots"].size(), 1u) << r.body;
  EXPECT_EQ(body["Snapshots"][0].value("SourceVolumeID", ""), "snap-b") << r.body;
  ASSERT_EQ(body["Errors"].size(), 1u) << r.body;
  EXPECT_EQ(body["Errors"][0].value("Name", ""), "first");
}

// A volume is marked Deleting before DeleteVolume is sent, so an allocation submitted while the
// plugin works cannot claim storage that is about to vanish.
TEST_F(Lifecycle, NoClaimIsTakenWhileTheVolumeIsBeingDeleted) {
  ASSERT_FALSE(cluster->create_volume("doomed").is_null());
  for (auto n : {"node-1", "node-2"})
    cluster->set_faults(n, json::array({{{"rpc", "DeleteVolume"}, {"delay_ms", 1500}}}));
  auto deleting = std::async(std::launch::async, [port = cluster->http_port()] {
    return controlplane::http_request(port, "DELETE", "/v1/volume/csi/doomed/delete");
  });
  ASSERT_TRUE(Cluster::eventually([&] { return cluster->volume("doomed").value("Deleting", false); }, 5s));
  auto refused = cluster->request("POST", "/v1/allocations",
                                  json{{"Allocation", allocation("late", "doomed", "node-1", "sleep 600")}}.dump());
  EXPECT_EQ(refused.status, 409u) << refused.body;
  EXPECT_NE(refused.body.find("is being deleted"), std::string::npos) << refused.body;
  auto snap = cluster->request("PUT", "/v1/volumes/snapshot",
                               json{{"Snapshots", {{{"SourceVolumeID", "doomed"}, {"Name", "late"}}}}}.dump());
  EXPECT_EQ(snap.status, 409u) << snap.body;
  auto answer = deleting.get();
  EXPECT_EQ(answer.status, 200u) << answer.body;
  EXPECT_EQ(cluster->request("GET", "/v1/volume/csi/doomed").status, 404u);
  for (auto n : {"node-1", "node-2"}) EXPECT_TRUE(cluster->calls(n, "NodeStageVolume").empty()) << n;
}

// A delete whose outcome is unknown keeps the volume marked (no claims) and is finished by the
// control plane itself: in the background, and again after a restart, with no operator.
TEST_F(Lifecycle, UncertainDeleteIsFinishedInTheBackgroundEvenAcrossARestart) {
  ASSERT_FALSE(cluster->create_volume("maybe-gone").is_null());
  for (auto n : {"node-1", "node-2"})
    cluster->set_faults(n, json::array({{{"rpc", "DeleteVolume"}, {"code", 4}}}));  // DEADLINE_EXCEEDED, always
  auto r = cluster->request("DELETE", "/v1/volume/csi/maybe-gone/delete");
  EXPECT_EQ(r.status, 504u) << r.body;
  EXPECT_NE(r.body.find("retried in the background"), std::string::npos) << r.body;
  EXPECT_TRUE(json::parse(r.body).contains("Error")) << "the API's error shape: " << r.body;
  EXPECT_TRUE(cluster->volume("maybe-gone").value("Deleting", false));
  auto refused = cluster->request("POST", "/v1/allocations",
                                  json{{"Allocation", allocation("a", "maybe-gone", "node-1", "sleep 600")}}.dump());
  EXPECT_EQ(refused.status, 409u) << refused.body;

  cluster->kill_controlplane();  // the background retry dies with it; the mark is on disk
  for (auto n : {"node-1", "node-2"}) cluster->set_faults(n, json::array());
  cluster->start_controlplane();
  EXPECT_TRUE(
      Cluster::eventually([&] { return cluster->request("GET", "/v1/volume/csi/maybe-gone").status == 404; }, 20s))
      << cluster->request("GET", "/v1/volume/csi/maybe-gone").body;
  bool event = false;
  for (const auto& e : cluster->get("/v1/events")) event |= e.value("Type", "") == "VolumeDeleted";
  EXPECT_TRUE(event);
}

// A plugin that refuses the delete (a final error) leaves the volume as it was: the mark is
// cleared, an event says why, and it can be claimed again.
TEST_F(Lifecycle, RefusedDeleteClearsTheMark) {
  ASSERT_FALSE(cluster->create_volume("kept").is_null());
  for (auto n : {"node-1", "node-2"})
    cluster->set_faults(n, json::array({{{"rpc", "DeleteVolume"}, {"code", 9}, {"count", 1}}}));  // FAILED_PRECONDITION
  auto r = cluster->request("DELETE", "/v1/volume/csi/kept/delete");
  EXPECT_EQ(r.status, 409u) << r.body;
  EXPECT_FALSE(cluster->volume("kept").value("Deleting", true));
  bool event = false;
  for (const auto& e : cluster->get("/v1/events")) event |= e.value("Type", "") == "VolumeDeleteRefused";
  EXPECT_TRUE(event);
  auto a = cluster->run_alloc(allocation("a", "kept", "node-1", "sleep 600"));
  EXPECT_TRUE(Cluster::eventually([&] { return cluster->alloc_status(a) == "running"; }));
}

TEST_F(Lifecycle, BadInputIsRefusedAndChangesNothing) {
  auto before = cluster->request("GET", "/v1/volumes").header("x-mooring-index");
  EXPECT_EQ(cluster->request("PUT", "/v1/volume/csi/x/create", "{not json").status, 400u);
  EXPECT_EQ(cluster->request("PUT", "/v1/volume/csi/..%2Fetc/create", "{}").status, 400u);
  auto unknown_plugin = cluster->request(
      "PUT", "/v1/volume/csi/v/create",
      json{{"Volumes",
            {{{"ID", "v"},
              {"PluginID", "nope"},
              {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}}
          .dump());
  EXPECT_EQ(unknown_plugin.status, 400u);
  EXPECT_NE(unknown_plugin.body.find("nope"), std::string::npos) << unknown_plugin.body;
  EXPECT_EQ(cluster->request("DELETE", "/v1/volume/csi/missing/delete").status, 404u);
  EXPECT_EQ(cluster->request("DELETE", "/v1/volume/csi/missing/detach?node=node-1").status, 404u);
  EXPECT_EQ(cluster->request("DELETE", "/v1/volume/csi/missing/detach").status, 400u);
  EXPECT_EQ(
      cluster->request(
                 "POST", "/v1/allocations",
                 R"({"Allocation":{"Name":"x","Volumes":{"d":{"Type":"csi","Source":"missing","AccessMode":"single-node-writer","AttachmentMode":"file-system"}}}})")
              .status /
          100,
      4u);
  EXPECT_EQ(cluster->request("GET", "/v1/volumes").header("x-mooring-index"), before);
  EXPECT_TRUE(cluster->calls("node-1", "CreateVolume").empty() && cluster->calls("node-2", "CreateVolume").empty());
}

}  // namespace
}  // namespace mooring::e2e
