// The pure release rules: which step comes next for a past claim, and why.
#include <gtest/gtest.h>

#include "services/controlplane/claims/publish_outcome.hpp"
#include "services/controlplane/gc/release_rules.hpp"
#include "tests/controlplane/gc/gc_fixture.hpp"

namespace mooring::controlplane::testing {

using domain::ClaimState;
using gc::ReleaseAction;

class ReleaseRulesTest : public ::testing::Test {
 protected:
  domain::Plugin plug = GcFixture::plugin("csi", {"node-1"}, {"node-2"});
  domain::Node n1 = GcFixture::node("node-1", "127.0.0.1:1");
  domain::Time now = domain::now();

  gc::ReleaseDecision decide(const domain::Volume& v, const std::string& alloc, const domain::Node* node,
                             const domain::Allocation* a = nullptr, const domain::Plugin* p = nullptr) {
    return gc::decide_release(v, v.claims.at(alloc), gc::ReleaseView{p ? p : &plug, node, a, now});
  }
};

TEST_F(ReleaseRulesTest, UnpublishingOnAReadyNodeAsksTheAgent) {
  auto v = GcFixture::volume("v", "csi", {fixtures::claim("a", "node-1", ClaimState::unpublishing)});
  EXPECT_EQ(decide(v, "a", &n1).action, ReleaseAction::detach_node);
}

TEST_F(ReleaseRulesTest, NodeGoneOrNoAccessModeSkipsTheNodeStep) {
  auto v = GcFixture::volume("v", "csi", {fixtures::claim("a", "node-1", ClaimState::unpublishing)});
  auto d = decide(v, "a", nullptr);
  EXPECT_EQ(d.action, ReleaseAction::advance);
  EXPECT_EQ(d.to, ClaimState::node_detached);
  EXPECT_NE(d.reason.find("gone"), std::string::npos);
  v.claims.at("a").access_mode = domain::AccessMode::unknown;
  d = decide(v, "a", &n1);
  EXPECT_EQ(d.action, ReleaseAction::advance);
  EXPECT_NE(d.reason.find("no access mode"), std::string::npos);
}

TEST_F(ReleaseRulesTest, DownNodeWaitsUntilStopAfterClientDisconnectHasPassed) {
  auto v = GcFixture::volume("v", "csi", {fixtures::claim("a", "node-1", ClaimState::unpublishing)});
  n1.status = domain::NodeStatus::down;
  n1.events.push_back({now - std::chrono::seconds(10), "cluster", "node down: missed heartbeats", {}});
  n1.last_heartbeat = now - std::chrono::seconds(20);
  auto d = decide(v, "a", &n1);
  EXPECT_EQ(d.action, ReleaseAction::wait_for_node);
  EXPECT_NE(d.reason.find("node \"node-1\" is down; waiting for it to return or for an operator detach"), std::string::npos);
  EXPECT_FALSE(domain::is_set(d.retry_at));

  auto a = GcFixture::allocation("a", "node-1", "v");
  a.stop_after_client_disconnect = std::chrono::seconds(30);
  d = decide(v, "a", &n1, &a);
  EXPECT_EQ(d.action, ReleaseAction::wait_for_node);
  EXPECT_EQ(d.retry_at, now - std::chrono::seconds(10) + std::chrono::seconds(30));  // counted from the down event

  a.stop_after_client_disconnect = std::chrono::seconds(5);
  d = decide(v, "a", &n1, &a);
  EXPECT_EQ(d.action, ReleaseAction::advance);
  EXPECT_NE(d.reason.find("abandoned"), std::string::npos);
}

TEST_F(ReleaseRulesTest, ControllerStepRules) {
  auto v = GcFixture::volume("v", "csi", {fixtures::claim("a", "node-1", ClaimState::node_detached, false)});
  auto d = decide(v, "a", &n1);
  EXPECT_EQ(d.action, ReleaseAction::unpublish_controller);
  EXPECT_EQ(d.external_node_id, "csi-node-1");  // from the plugin's node info when the claim has none

  auto other = fixtures::claim("b", "node-1", ClaimState::unpublishing);
  v.claims["b"] = other;
  EXPECT_EQ(decide(v, "a", &n1).action, ReleaseAction::advance);
  v.claims["b"].state = ClaimState::controller_detached;
  EXPECT_EQ(decide(v, "a", &n1).action, ReleaseAction::unpublish_controller);
  v.claims["b"].node_id = "node-7";
  v.claims["b"].state = ClaimState::taken;
  EXPECT_EQ(decide(v, "a", &n1).action, ReleaseAction::unpublish_controller);  // other nodes do not matter

  auto no_attach = GcFixture::plugin("csi", {"node-1"}, {"node-2"}, false);
  EXPECT_EQ(decide(v, "a", &n1, nullptr, &no_attach).action, ReleaseAction::advance);
  auto node_only = GcFixture::plugin("csi", {"node-1"}, {});
  EXPECT_EQ(decide(v, "a", &n1, nullptr, &node_only).action, ReleaseAction::advance);

  // A plugin that requires a controller that has not reported: wait, do not guess.
  auto unknown = GcFixture::plugin("csi", {"node-1"}, {});
  unknown.controller_required = true;
  EXPECT_EQ(decide(v, "a", &n1, nullptr, &unknown).action, ReleaseAction::wait_for_controller);

  auto gone = gc::decide_release(v, v.claims.at("a"), gc::ReleaseView{nullptr, &n1, nullptr, now});
  EXPECT_EQ(gone.action, ReleaseAction::wait_for_controller);
  EXPECT_NE(gone.reason.find("no CSI plugin named \"csi\""), std::string::npos);
}

// Found by the chaos checker: a claim whose ControllerPublish is unconfirmed may still be dropped
// (the plugin refuses it for certain), so the detach is not left to it: the release waits for
// the outcome, then detaches unless the other claim holds the publication.
TEST_F(ReleaseRulesTest, TheControllerDetachWaitsForAnotherClaimsUnconfirmedPublish) {
  auto v = GcFixture::volume("v", "csi", {fixtures::claim("a", "node-1", ClaimState::node_detached, false)});
  v.claims.at("a").controller_publish = domain::ControllerPublish::sent;
  auto b = fixtures::claim("b", "node-1", ClaimState::taken);
  b.controller_publish = domain::ControllerPublish::sent;
  b.last_error = kPublishPending;
  v.claims["b"] = b;
  auto d = decide(v, "a", &n1);
  EXPECT_EQ(d.action, ReleaseAction::wait_for_controller);
  EXPECT_NE(d.reason.find("allocation \"b\" on the same node \"node-1\" waits for its ControllerPublishVolume"),
            std::string::npos)
      << d.reason;

  v.claims.at("b").last_error.clear();  // published: b holds the node's publication now
  EXPECT_EQ(decide(v, "a", &n1).action, ReleaseAction::advance);
  v.claims.erase("b");  // dropped: a is the last and detaches
  EXPECT_EQ(decide(v, "a", &n1).action, ReleaseAction::unpublish_controller);
}

// What the claim path recorded wins over the plugin's current facts, which a restarted agent may
// not have reported yet.
TEST_F(ReleaseRulesTest, TheControllerStepFollowsWhatTheClaimRecorded) {
  auto v = GcFixture::volume("v", "csi", {fixtures::claim("a", "node-1", ClaimState::node_detached, false)});
  auto no_attach = GcFixture::plugin("csi", {"node-1"}, {"node-2"}, false);
  v.claims.at("a").controller_publish = domain::ControllerPublish::sent;
  EXPECT_EQ(decide(v, "a", &n1, nullptr, &no_attach).action, ReleaseAction::unpublish_controller)
      << "ControllerPublish was sent: ControllerUnpublish follows whatever the plugin reports now";
  v.claims.at("a").controller_publish = domain::ControllerPublish::not_needed;
  auto d = decide(v, "a", &n1);
  EXPECT_EQ(d.action, ReleaseAction::advance);
  EXPECT_NE(d.reason.find("did not need ControllerPublishVolume"), std::string::npos);
}

// A claim recorded before the field existed, on a plugin whose agents restarted and reported it
// before fingerprinting it again: nothing is known, so the claim waits for the facts.
TEST_F(ReleaseRulesTest, AnUnknownClaimWaitsWhileNoInstanceIsFingerprinted) {
  auto v = GcFixture::volume("v", "csi", {fixtures::claim("a", "node-1", ClaimState::node_detached, false)});
  domain::Plugin restarted;
  restarted.id = "csi";
  for (const auto& [node, type] : {std::pair{"node-1", domain::PluginType::node},
                                   std::pair{"node-2", domain::PluginType::controller}}) {
    domain::PluginInstance i;
    i.plugin_id = "csi";
    i.node_id = node;
    i.type = type;
    i.health_description = "not fingerprinted yet";
    domain::upsert_instance(restarted, i);
  }
  EXPECT_FALSE(domain::needs_controller_publish(restarted).has_value());
  auto d = decide(v, "a", &n1, nullptr, &restarted);
  EXPECT_EQ(d.action, ReleaseAction::wait_for_controller);
  EXPECT_NE(d.reason.find("has reported its capabilities"), std::string::npos) << d.reason;
}

TEST_F(ReleaseRulesTest, ControllerDetachedAndReadyToFreeAreFreed) {
  auto v = GcFixture::volume("v", "csi", {fixtures::claim("a", "node-1", ClaimState::controller_detached)});
  EXPECT_EQ(decide(v, "a", &n1).action, ReleaseAction::free);
  v.claims.at("a").state = ClaimState::ready_to_free;
  EXPECT_EQ(decide(v, "a", &n1).action, ReleaseAction::free);
}

}  // namespace mooring::controlplane::testing
