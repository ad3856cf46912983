// The claim GC on in-process fake agent calls (tests/controlplane/support/fake_release_calls.hpp):
// the requests a release builds, and how it reads each answer, with no agent and no gRPC port.
#include <gtest/gtest.h>

#include "services/controlplane/claims/operation_id.hpp"
#include "tests/controlplane/gc/gc_fixture.hpp"
#include "tests/controlplane/support/fake_release_calls.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane::testing {

using domain::ClaimState;

class ClaimGcCallsTest : public GcFixture {
 protected:
  using Detach = v1::NodeDetachVolumeResponse;
  using Unpublish = ::csi::v1::ControllerUnpublishVolumeResponse;

  // node-1 runs the node plugin and node-2 the controller; nobody listens at their addresses.
  void SetUp() override {
    make_plane(fast_gc(), &calls);
    Batch b;
    fixtures::put_running(b, {plugin("csi", {"node-1"}, {"node-2"})}, nullptr,
                          {node("node-1", "127.0.0.1:1"), node("node-2", "127.0.0.1:2")});
    b.put(volume("vol-1", "csi", {fixtures::claim("a1", "node-1", ClaimState::unpublishing)}));
    commit(std::move(b));
  }
  // `calls` is destroyed before the base's plane: stop the GC first, so no retry reaches it.
  void TearDown() override { shutdown_plane(); }

  bool released_event() {
    return on_io([&] {
      for (const auto& e : plane->store.events())
        if (e.type == "ClaimReleased" && e.key == "vol-1") return true;
      return false;
    });
  }

  FakeReleaseCalls calls;
};

TEST_F(ClaimGcCallsTest, TheReleaseSendsTheClaimsNodeRequestThenTheProvidersIdsToTheController) {
  calls.node_detaches.script.push_back(FakeReleaseCalls::ok<Detach>());
  calls.unpublishes.script.push_back(FakeReleaseCalls::ok<Unpublish>());
  start_gc();
  ASSERT_TRUE(eventually([&] { return freed("vol-1", "a1"); }));
  EXPECT_TRUE(released_event());

  ASSERT_EQ(calls.node_detaches.requests.size(), 1u);
  EXPECT_EQ(calls.node_detaches.targets[0], "node-1");
  const auto& detach = calls.node_detaches.requests[0];
  EXPECT_EQ(detach.plugin_id(), "csi");
  EXPECT_EQ(detach.volume_id(), "vol-1");
  EXPECT_EQ(detach.external_id(), "ext-vol-1");
  EXPECT_EQ(detach.alloc_id(), "a1");
  EXPECT_EQ(detach.access_mode(), v1::ACCESS_MODE_SINGLE_NODE_WRITER);
  EXPECT_EQ(detach.attachment_mode(), v1::ATTACHMENT_MODE_FILE_SYSTEM);
  EXPECT_FALSE(detach.read_only());  // a write claim

  ASSERT_EQ(calls.unpublishes.requests.size(), 1u);
  EXPECT_EQ(calls.unpublishes.targets[0], "csi");
  EXPECT_EQ(calls.unpublishes.volume_keys[0], "vol-1");
  const auto& unpublish = calls.unpublishes.requests[0];
  EXPECT_EQ(unpublish.volume_id(), "ext-vol-1");  // the provider's ids, never ours
  EXPECT_EQ(unpublish.node_id(), "csi-node-1");
  EXPECT_EQ(unpublish.secrets().at("token"), "s3cret");
  auto c = fixtures::claim("a1", "node-1", ClaimState::unpublishing);
  EXPECT_EQ(calls.unpublishes.operation_ids[0], unpublish_operation_id("vol-1", "a1", c));
  EXPECT_TRUE(calls.gets.requests.empty());  // not a resumed release: nothing asked first
}

TEST_F(ClaimGcCallsTest, AFailedNodeStepIsRecordedOnTheClaimAndRetriedWithTheSameRequest) {
  calls.node_detaches.script.push_back(FakeReleaseCalls::failed<Detach>(
      csi::Rpc::NodeUnpublishVolume, grpc::StatusCode::UNAVAILABLE, "the agent of node-1 is restarting"));
  start_gc();
  // The failure is an event naming the step and the agent's answer; retries (the script is
  // empty now: nobody to ask) keep the claim where it was.
  ASSERT_TRUE(eventually([&] {
    for (const auto& e : plane->store.events())
      if (e.type == "ClaimReleaseFailed" && e.message.find("the agent of node-1 is restarting") != std::string::npos)
        return true;
    return false;
  }));
  ASSERT_TRUE(eventually([&] { return calls.node_detaches.requests.size() >= 2; }));
  auto c = claim("vol-1", "a1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, ClaimState::unpublishing);  // not advanced past the failed step
  EXPECT_FALSE(c->last_error.empty());
  EXPECT_TRUE(domain::is_set(c->next_attempt));
  EXPECT_TRUE(calls.unpublishes.requests.empty());  // the controller step waits for the node's

  on_io([&] {
    calls.node_detaches.script.push_back(FakeReleaseCalls::ok<Detach>());
    calls.unpublishes.script.push_back(FakeReleaseCalls::ok<Unpublish>());
    return 0;
  });
  ASSERT_TRUE(eventually([&] { return freed("vol-1", "a1"); }));
  ASSERT_GE(calls.node_detaches.requests.size(), 2u);
  EXPECT_EQ(calls.node_detaches.requests.front().SerializeAsString(),
            calls.node_detaches.requests.back().SerializeAsString());
}

// NOT_FOUND on a release means already gone (the CSI error table): done, and the claim is freed.
TEST_F(ClaimGcCallsTest, AControllerThatNoLongerKnowsTheVolumeCountsAsUnpublished) {
  calls.node_detaches.script.push_back(FakeReleaseCalls::ok<Detach>());
  calls.unpublishes.script.push_back(FakeReleaseCalls::failed<Unpublish>(
      csi::Rpc::ControllerUnpublishVolume, grpc::StatusCode::NOT_FOUND, "volume ext-vol-1 not found"));
  start_gc();
  ASSERT_TRUE(eventually([&] { return freed("vol-1", "a1"); }));
  EXPECT_EQ(calls.unpublishes.requests.size(), 1u);
  EXPECT_TRUE(released_event());
}

// Nobody to ask (no healthy controller): the claim stays node-detached with the reason, and a
// controller's answer later frees it; the node step is not sent again.
TEST_F(ClaimGcCallsTest, NoControllerToAskKeepsTheClaimNodeDetachedUntilOneAnswers) {
  calls.node_detaches.script.push_back(FakeReleaseCalls::ok<Detach>());
  start_gc();
  ASSERT_TRUE(eventually([&] { return calls.unpublishes.requests.size() >= 2; }));
  auto c = claim("vol-1", "a1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, ClaimState::node_detached);
  EXPECT_EQ(c->last_error, "nobody to ask (fake)");

  on_io([&] {
    calls.unpublishes.script.push_back(FakeReleaseCalls::ok<Unpublish>());
    return 0;
  });
  ASSERT_TRUE(eventually([&] { return freed("vol-1", "a1"); }));
  EXPECT_EQ(calls.node_detaches.requests.size(), 1u);
}

}  // namespace mooring::controlplane::testing
