// The claim GC's state machine against fake node agents on real gRPC ports: every branch of the
// release, ordering, retries that stay visible, node loss, restart, and a thousand releases.
#include <gtest/gtest.h>

#include "services/controlplane/agentclient/router_publisher.hpp"
#include "services/controlplane/claims/claim_path.hpp"
#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/claims/operation_id.hpp"
#include "tests/controlplane/gc/gc_fixture.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane::testing {

using domain::ClaimState;
using domain::NodeStatus;

class ClaimGcTest : public GcFixture {
 protected:
  // node-1 runs the node plugin and node-2 the controller, both with live agents.
  void SetUp() override {
    addr1 = agents.start("node-1");
    addr2 = agents.start("node-2");
    make_plane();
    Batch b;
    fixtures::put_running(b, {plugin("csi", {"node-1"}, {"node-2"})}, nullptr,
                          {node("node-1", addr1), node("node-2", addr2)});
    commit(std::move(b));
  }

  void put_volume(domain::Volume v) {
    Batch b;
    b.put(std::move(v));
    commit(std::move(b));
  }

  std::string addr1, addr2;
};

TEST_F(ClaimGcTest, NodeDetachThenControllerUnpublishThenFree) {
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return !plane->store.volume("vol-1")->claims.count("a1"); }));

  auto node_calls = agents["node-1"].calls("NodeDetachVolume");
  auto ctrl_calls = agents["node-2"].calls("ControllerUnpublishVolume");
  ASSERT_EQ(node_calls.size(), 1u);
  ASSERT_EQ(ctrl_calls.size(), 1u);
  EXPECT_EQ(node_calls[0].volume_id, "vol-1");
  EXPECT_EQ(node_calls[0].alloc_id, "a1");
  EXPECT_EQ(node_calls[0].plugin_id, "csi");
  // The controller gets the provider's ids (seed 001) and the volume's secrets.
  EXPECT_EQ(ctrl_calls[0].volume_id, "ext-vol-1");
  EXPECT_EQ(ctrl_calls[0].node_id, "csi-node-1");
  EXPECT_EQ(ctrl_calls[0].secrets.at("token"), "s3cret");
  // The node plugin's RPC strictly before the controller's.
  EXPECT_LE(node_calls[0].end, ctrl_calls[0].start);
  EXPECT_EQ(agents["node-1"].count("ControllerUnpublishVolume"), 0u);

  // Every step was persisted: a write saw node-detached before the claim disappeared.
  settle();
  bool saw_node_detached = false;
  for (const auto& tx : backend.transactions)
    for (const auto& m : tx.mutations)
      if (m.table == Table::volumes && m.value && m.value->find("node-detached") != std::string::npos)
        saw_node_detached = true;
  EXPECT_TRUE(saw_node_detached);
  EXPECT_TRUE(on_io([&] {
    for (const auto& e : plane->store.events())
      if (e.type == "ClaimReleased" && e.key == "vol-1") return true;
    return false;
  }));
}

TEST_F(ClaimGcTest, AlreadyControllerDetachedIsFreedWithoutCalls) {
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::controller_detached)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_TRUE(agents["node-1"].calls().empty());
  EXPECT_TRUE(agents["node-2"].calls().empty());
  EXPECT_EQ(on_io([&] { return plane->store.volume("vol-1")->access_mode; }), domain::AccessMode::unknown);
}

TEST_F(ClaimGcTest, AgentAlreadyUnpublishedSkipsNodeStep) {
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::node_detached)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 0u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

TEST_F(ClaimGcTest, TheUnpublishCarriesTheClaimsOperationId) {
  auto c = fixtures::claim("a1", "node-1", ClaimState::unpublishing);
  c.create_time = domain::from_unix_ms(1'790'000'000'123);
  put_volume(volume("vol-1", "csi", {c}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  auto calls = agents["node-2"].calls("ControllerUnpublishVolume");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].operation_id, unpublish_operation_id("vol-1", "a1", c));
  EXPECT_NE(calls[0].operation_id.find("1790000000123"), std::string::npos) << calls[0].operation_id;
}

// Resumed (node-detached when the GC started): the unpublish may have been sent before, to an
// agent that has restarted since. A plugin that reports published nodes is asked first.
class ResumedUnpublishTest : public ClaimGcTest {
 protected:
  void SetUp() override {
    ClaimGcTest::SetUp();
    auto p = plugin("csi", {"node-1"}, {"node-2"});
    for (auto& [id, inst] : p.controllers) {
      inst.controller_info->supports_get = true;
      inst.controller_info->supports_list_volumes_attached_nodes = true;
    }
    Batch b;
    put_running_on_io(b, p);
    commit(std::move(b));
  }
};

TEST_F(ResumedUnpublishTest, NotPublishedToTheNodeAnymoreIsControllerDetachedWithoutTheCall) {
  agents["node-2"].set_published("ext-vol-1", {"csi-node-9"});  // another node's publication only
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::node_detached)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-2"].count("ControllerGetVolume"), 1u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 0u);
}

TEST_F(ResumedUnpublishTest, StillPublishedToTheNodeIsUnpublished) {
  agents["node-2"].set_published("ext-vol-1", {"csi-node-1"});
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::node_detached)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-2"].count("ControllerGetVolume"), 1u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

TEST_F(ResumedUnpublishTest, AControllerThatCannotBeReachedIsAskedAgainLaterAndNothingIsSentMeanwhile) {
  // The agent is restarting: the question fails, so the unpublish (which could get through a
  // moment later, unchecked) waits for the step's retry.
  agents["node-2"].fail("ControllerGetVolume", grpc::StatusCode::UNAVAILABLE, "plugin csi not running on node node-2", 2);
  agents["node-2"].set_published("ext-vol-1", {});
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::node_detached)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-2"].count("ControllerGetVolume"), 3u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 0u);
}

TEST_F(ResumedUnpublishTest, APluginThatCannotTellIsUnpublishedAsBefore) {
  // ControllerGetVolume answers NOT_FOUND (set_published not called); ListVolumes is not served.
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::node_detached)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

TEST_F(ResumedUnpublishTest, AReleaseThisProcessBeganDoesNotAskThePlugin) {
  agents["node-2"].set_published("ext-vol-1", {"csi-node-1"});
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-2"].count("ControllerGetVolume"), 0u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

TEST_F(ClaimGcTest, AnotherLiveClaimOnTheSameNodeSkipsTheControllerStep) {
  put_volume(volume("vol-1", "csi",
                    {fixtures::claim("a1", "node-1", ClaimState::unpublishing), fixtures::claim("a2", "node-1", ClaimState::taken)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return !plane->store.volume("vol-1")->claims.count("a1"); }));
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 1u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 0u);
  ASSERT_TRUE(claim("vol-1", "a2"));
  EXPECT_EQ(claim("vol-1", "a2")->state, ClaimState::taken);

  // The last claim to leave the node detaches it.
  on_io([&] {
    domain::Volume v = *plane->store.volume("vol-1");
    EXPECT_FALSE(advance_claim(v, "a2", ClaimState::unpublishing, domain::now()));
    Batch b;
    b.put(v);
    return plane->store.commit(std::move(b)).ok();
  });
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

// The release-order race a chaos run found (docs/chaos.md): a writer's release on node-1 sends
// its ControllerUnpublish; while it is under way a reader claims the volume on node-1. Its
// ControllerPublish must not reach a controller before that unpublish has answered: published
// first, it is undone by the unpublish (or refused beside the writer's publication, the claim
// dropped and published again).
TEST_F(ClaimGcTest, AClaimOnTheNodeIsNotPublishedWhileAReleasesControllerUnpublishIsUnderWay) {
  agents["node-2"].delay("ControllerUnpublishVolume", 800ms);
  auto p = plugin("csi", {"node-1"}, {"node-2"});
  auto n1 = node("node-1", addr1);
  n1.plugins["csi"] = p.nodes.at("node-1");
  auto writer = fixtures::claim("w", "node-1", ClaimState::node_detached);
  writer.controller_publish = domain::ControllerPublish::sent;
  Batch b;
  b.put(n1);
  b.put(allocation("r", "node-1", "vol-1"));
  b.put(volume("vol-1", "csi", {writer}));
  commit(std::move(b));
  agentclient::RouterPublisher publisher(plane->router);
  ClaimPath path(io.get_executor(), plane->store, &publisher);
  auto claim_reader = [&] {
    ClaimInput in{.volume_key = "vol-1",
                  .allocation_id = "r",
                  .node_id = "node-1",
                  .mode = domain::ClaimMode::read,
                  .access_mode = domain::AccessMode::single_node_writer,
                  .attachment_mode = domain::AttachmentMode::file_system};
    return asio::co_spawn(io, path.claim(std::move(in)), asio::use_future).get();
  };

  start_gc();
  ASSERT_TRUE(eventually([&] { return agents["node-2"].max_in_flight("ControllerUnpublishVolume") > 0; }));
  auto during = claim_reader();
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(during));
  EXPECT_EQ(std::get<ClaimFailure>(during).refusal.kind, Refusal::Kind::unavailable);
  EXPECT_FALSE(claim("vol-1", "r"));

  ASSERT_TRUE(eventually([&] { return freed("vol-1", "w"); }));
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(claim_reader()));
  auto unpublishes = agents["node-2"].calls("ControllerUnpublishVolume");
  auto publishes = agents["node-2"].calls("ControllerPublishVolume");
  ASSERT_EQ(unpublishes.size(), 1u);
  ASSERT_EQ(publishes.size(), 1u);  // once: never refused beside the writer and sent again
  EXPECT_LE(unpublishes[0].end, publishes[0].start);
  ASSERT_TRUE(claim("vol-1", "r"));
  EXPECT_EQ(claim("vol-1", "r")->state, ClaimState::taken);
}

TEST_F(ClaimGcTest, ControllerUnreachableKeepsClaimNodeDetachedVisiblyThenCompletes) {
  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::UNAVAILABLE, "plugin csi not running on node node-2");
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return agents["node-2"].count("ControllerUnpublishVolume") >= 3; }));
  auto c = claim("vol-1", "a1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, ClaimState::node_detached);
  EXPECT_NE(c->last_error.find("ControllerUnpublishVolume"), std::string::npos) << c->last_error;
  EXPECT_NE(c->last_error.find("not running on node"), std::string::npos) << c->last_error;
  EXPECT_TRUE(domain::is_set(c->next_attempt));
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 1u);  // the node step is not repeated
  EXPECT_TRUE(on_io([&] {
    for (const auto& e : plane->store.events())
      if (e.type == "ClaimReleaseFailed" && e.key == "vol-1") return true;
    return false;
  }));

  agents["node-2"].heal("ControllerUnpublishVolume");
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
}

TEST_F(ClaimGcTest, ControllerNotRunningHereMovesToTheNextHealthyController) {
  std::string addr3 = agents.start("node-3");
  Batch b;
  put_running_on_io(b, plugin("csi", {"node-1"}, {"node-2", "node-3"}), {node("node-3", addr3)});
  commit(std::move(b));
  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::UNAVAILABLE, "plugin csi not running on node node-2");
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::node_detached)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
  EXPECT_EQ(agents["node-3"].count("ControllerUnpublishVolume"), 1u);
}

TEST_F(ClaimGcTest, NodeGoneWithExternalNodeIdSkipsNodeStepAndRunsController) {
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-gone", ClaimState::unpublishing)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  auto ctrl = agents["node-2"].calls("ControllerUnpublishVolume");
  ASSERT_EQ(ctrl.size(), 1u);
  EXPECT_EQ(ctrl[0].node_id, "csi-node-gone");
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 0u);
}

TEST_F(ClaimGcTest, NodeGoneWithoutExternalNodeIdIsFreed) {
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-gone", ClaimState::unpublishing, false)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_TRUE(agents["node-1"].calls().empty());
  EXPECT_TRUE(agents["node-2"].calls().empty());
}

TEST_F(ClaimGcTest, NoAccessModeRecordedSkipsNodeStep) {
  auto c = fixtures::claim("a1", "node-1", ClaimState::unpublishing);
  c.access_mode = domain::AccessMode::unknown;
  put_volume(volume("vol-1", "csi", {c}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 0u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

TEST_F(ClaimGcTest, PluginWithoutPublishUnpublishSkipsControllerStep) {
  Batch b;
  put_running_on_io(b, plugin("csi", {"node-1"}, {"node-2"}, false));
  commit(std::move(b));
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 1u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 0u);
}

TEST_F(ClaimGcTest, NodePluginDownMakesTheGcWaitAndCompleteWhenItReturns) {
  agents["node-1"].fail("NodeDetachVolume", grpc::StatusCode::UNAVAILABLE, "plugin csi not running on node node-1");
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
  start_gc();
  ASSERT_TRUE(eventually([&] { return agents["node-1"].count("NodeDetachVolume") >= 2; }));
  auto c = claim("vol-1", "a1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, ClaimState::unpublishing);
  EXPECT_NE(c->last_error.find("not running on node"), std::string::npos);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 0u);  // never before the node step
  agents["node-1"].heal("NodeDetachVolume");
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

// A volume marked for deregistration (purge) is released like any other, node side then controller
// side, and removed in the write that frees its last claim.
TEST_F(ClaimGcTest, APurgedVolumeIsRemovedWithItsLastClaim) {
  auto v = volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing),
                                   fixtures::claim("a2", "node-1", ClaimState::node_detached)});
  v.deregistering = true;
  put_volume(std::move(v));
  start_gc();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1") == nullptr; }));
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 1u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u) << "the last claim on the node detaches it";
  EXPECT_TRUE(on_io([&] {
    for (const auto& e : plane->store.events())
      if (e.type == "VolumeDeregistered" && e.key == "vol-1") return true;
    return false;
  }));
}

// With a long backoff, so that sleeping it out would show.
gc::GcOptions slow_gc() {
  auto o = fast_gc();
  o.backoff.initial = 20s;
  o.backoff.max = 60s;
  o.backoff.jitter = 0;
  return o;
}

// The node step failed and its retry is 20 s away; then the agent finishes the unmount on its own
// (its plugin came back) and reports it. The controller step starts at once: a backoff belongs to
// the step that failed, not to the claim.
TEST_F(ClaimGcTest, AStepDoneElsewhereDropsTheBackoffOfTheStepBefore) {
  settle();
  shutdown_plane();
  make_plane(slow_gc());
  agents["node-1"].fail("NodeDetachVolume", grpc::StatusCode::UNAVAILABLE, "plugin csi not running on node node-1");
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
  start_gc();
  ASSERT_TRUE(eventually([&] {
    auto c = claim("vol-1", "a1");
    return c && !c->last_error.empty() && domain::is_set(c->next_attempt);
  }));
  // What the agent service does when the agent reports the node side done.
  on_io([&] {
    domain::Volume v = *plane->store.volume("vol-1");
    v.claims.at("a1").state = ClaimState::node_detached;
    Batch b;
    b.put(std::move(v));
    return plane->store.commit(std::move(b)).ok();
  });
  const auto reported = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return freed("vol-1", "a1"); }, 5s)) << "slept out the node step's backoff";
  const auto took = std::chrono::steady_clock::now() - reported;
  std::cerr << "node side reported -> claim freed: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

// ControllerUnpublish failed (the controller's plugin is down) and the next try is 20 s away; the
// controller's agent then reports the plugin healthy again: the GC retries at once.
TEST_F(ClaimGcTest, APluginChangeRetriesAFailedControllerStepAtOnce) {
  settle();
  shutdown_plane();
  make_plane(slow_gc());
  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::UNAVAILABLE, "plugin csi is restarting", 1);
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::node_detached)}));
  start_gc();
  ASSERT_TRUE(eventually([&] {
    auto c = claim("vol-1", "a1");
    return c && c->last_error.find("restarting") != std::string::npos;
  }));
  Batch b;
  auto p = plugin("csi", {"node-1"}, {"node-2"});
  p.controllers.at("node-2").health_description = "healthy again";
  put_running_on_io(b, p);
  commit(std::move(b));
  ASSERT_TRUE(eventually([&] { return freed("vol-1", "a1"); }, 5s)) << "slept out the failed step's backoff";
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 2u);
}

TEST_F(ClaimGcTest, ReleaseStartsOnTheChangeThatMadeTheClaimPast) {
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::taken)}));
  start_gc();
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(agents["node-1"].calls().empty());  // a running allocation: nothing
  EXPECT_EQ(on_io([&] { return plane->gc.active_workers(); }), 0u);
  auto before = on_io([&] { return plane->gc.volumes_examined(); });
  on_io([&] {
    domain::Volume v = *plane->store.volume("vol-1");
    EXPECT_FALSE(advance_claim(v, "a1", ClaimState::unpublishing, domain::now()));
    Batch b;
    b.put(v);
    return plane->store.commit(std::move(b)).ok();
  });
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_GT(on_io([&] { return plane->gc.volumes_examined(); }), before);
  ASSERT_TRUE(eventually([&] { return plane->gc.active_workers() == 0; }));  // the watcher stops
}

TEST_F(ClaimGcTest, NodeDownWithoutStopAfterWaitsVisiblyUntilTheNodeReturns) {
  Batch b;
  b.put(node("node-1", addr1, NodeStatus::down));
  b.put(allocation("a1", "node-1", "vol-1", domain::ClientStatus::complete));
  commit(std::move(b));
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
  start_gc();
  ASSERT_TRUE(eventually([&] {
    auto& c = plane->store.volume("vol-1")->claims.at("a1");
    return c.last_error.find("is down; waiting for it to return or for an operator detach") != std::string::npos;
  }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 0u);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 0u);
  EXPECT_EQ(claim("vol-1", "a1")->state, ClaimState::unpublishing);

  Batch back;
  back.put(node("node-1", addr1, NodeStatus::ready));
  commit(std::move(back));
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }, 5s));
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 1u);
}

TEST_F(ClaimGcTest, NodeLossWithStopAfterClientDisconnectFreesWithoutAnOperator) {
  auto down = node("node-1", addr1, NodeStatus::down);
  down.events.push_back({domain::now(), "cluster", "node down: missed heartbeats for 10s", {}});
  auto a = allocation("a1", "node-1", "vol-1");
  a.stop_after_client_disconnect = 300ms;
  Batch b;
  b.put(down);
  b.put(a);
  commit(std::move(b));
  agents.stop("node-1");  // the agent is gone with its node
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::taken)}));
  start_gc();
  start_loss();
  ASSERT_TRUE(eventually([&] { return plane->store.volume("vol-1")->claims.empty(); }));
  EXPECT_EQ(on_io([&] { return plane->store.allocation("a1")->client_status; }), domain::ClientStatus::lost);
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 0u);
  auto ctrl = agents["node-2"].calls("ControllerUnpublishVolume");
  ASSERT_EQ(ctrl.size(), 1u);
  EXPECT_EQ(ctrl[0].node_id, "csi-node-1");
}

TEST_F(ClaimGcTest, RestartResumesEveryPastClaim) {
  agents["node-1"].fail("NodeDetachVolume", grpc::StatusCode::INTERNAL, "disk busy");
  put_volume(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
  put_volume(volume("vol-2", "csi", {fixtures::claim("a2", "node-1", ClaimState::node_detached)}));
  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::INTERNAL, "api throttled");
  start_gc();
  ASSERT_TRUE(eventually([&] { return !plane->store.volume("vol-1")->claims.at("a1").last_error.empty(); }));
  shutdown_plane();  // the process stops with both releases unfinished

  agents["node-1"].heal("NodeDetachVolume");
  agents["node-2"].heal("ControllerUnpublishVolume");
  make_plane();  // a new store loads the same backend
  EXPECT_EQ(claim("vol-1", "a1")->state, ClaimState::unpublishing);
  EXPECT_EQ(claim("vol-2", "a2")->state, ClaimState::node_detached);
  start_gc();
  ASSERT_TRUE(eventually([&] { return freed("vol-1", "a1") && freed("vol-2", "a2"); }));
}

TEST_F(ClaimGcTest, ThousandVolumesReleasedQuicklyWithWorkPerChangeIndependentOfN) {
  constexpr int kVolumes = 1000;
  {
    Batch b;
    for (int i = 0; i < kVolumes; ++i) {
      std::string id = "vol-" + std::to_string(i);
      b.put(volume(id, "csi", {fixtures::claim("a-" + std::to_string(i), "node-1", ClaimState::taken)}));
    }
    commit(std::move(b));
  }
  // A little latency, as a real controller has: parallel releases overlap, serialized ones cannot.
  agents["node-2"].delay("ControllerUnpublishVolume", std::chrono::milliseconds(2));
  start_gc();
  auto examined_before = on_io([&] { return plane->gc.volumes_examined(); });
  auto started = std::chrono::steady_clock::now();
  // One write makes every claim past (as a node's allocations all stopping would).
  on_io([&] {
    Batch b;
    for (const auto& [id, v] : plane->store.volumes()) {
      domain::Volume copy = v;
      for (auto& [alloc, c] : copy.claims) c.state = ClaimState::node_detached;
      b.put(std::move(copy));
    }
    return plane->store.commit(std::move(b)).ok();
  });
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& [id, v] : plane->store.volumes())
          if (!v.claims.empty()) return false;
        return true;
      },
      60s));
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  std::printf("[ timing ] %d volumes released in %lld ms\n", kVolumes, static_cast<long long>(elapsed.count()));
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), static_cast<std::size_t>(kVolumes));
  EXPECT_GT(agents["node-2"].max_in_flight("ControllerUnpublishVolume"), 1);  // volumes in parallel
  // Each volume is looked at once per write that touched it (a few), never once per write to any volume.
  auto examined = on_io([&] { return plane->gc.volumes_examined(); }) - examined_before;
  EXPECT_LE(examined, static_cast<std::uint64_t>(kVolumes) * 4) << examined;
  EXPECT_LT(elapsed, 30s);
}

}  // namespace mooring::controlplane::testing
