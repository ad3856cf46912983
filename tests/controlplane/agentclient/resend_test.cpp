// A call to a node whose agent was replaced (restarted, registered again, maybe at another
// address) follows it: the router resends the same request — the same operation id — to the new
// agent rather than giving up, and a claim whose publish went out that way is granted, not
// released. A node marked down, or an agent that answered itself, keeps the old outcome. Fake
// agents on real gRPC ports; registrations counted as the agent service counts them.
#include <gtest/gtest.h>

#include <boost/asio/use_awaitable.hpp>

#include <future>

#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/agentclient/router_publisher.hpp"
#include "services/controlplane/claims/claim_path.hpp"
#include "services/controlplane/claims/operation_id.hpp"
#include "services/controlplane/claims/publish_outcome.hpp"
#include "services/controlplane/nodes/node_registrations.hpp"
#include "shared/rpc/transport_security.hpp"
#include "tests/controlplane/gc/gc_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane::testing {

namespace {

using Unpublished = agentclient::AgentResult<::csi::v1::ControllerUnpublishVolumeResponse>;
using Clock = std::chrono::steady_clock;

// node-1 runs the node plugin, node-2 the only controller of "csi"; allocation a1 on node-1
// claims vol-1. The router under test counts registrations and waits for an agent that cannot
// be reached to register again (up to `wait`).
class ResendTest : public GcFixture {
 protected:
  void SetUp() override {
    make_plane();
    Batch b;
    auto p = plugin("csi", {"node-1"}, {"node-2"});
    fixtures::put_running(b, {p}, nullptr,
                          {node("node-1", agents.start("node-1")), node("node-2", agents.start("node-2"))});
    b.put(allocation("a1", "node-1", "vol-1"));
    commit(std::move(b));
  }
  void TearDown() override {
    on_io([&] {
      path.reset();
      publisher.reset();
      router.reset();
      return 0;
    });
  }

  void make_router(std::chrono::milliseconds wait, std::shared_ptr<const rpc::TransportSecurity> security = nullptr) {
    on_io([&] {
      agentclient::AgentRouterOptions o{.channel = {.security = std::move(security)}, .timeout_override = 5s};
      o.registrations = &registrations;
      o.reregistration_wait = wait;
      router = std::make_unique<agentclient::AgentRouter>(io.get_executor(), plane->store, o);
      publisher = std::make_unique<agentclient::RouterPublisher>(*router);
      path = std::make_unique<ClaimPath>(io.get_executor(), plane->store, publisher.get());
      return 0;
    });
  }

  // What the agent service does when node-2's agent registers (again) at `address`.
  void register_node2(const std::string& address) {
    on_io([&] {
      auto n = *plane->store.node("node-2");
      n.address = address;
      n.status = domain::NodeStatus::ready;
      Batch b;
      b.put(n);
      if (!plane->store.commit(std::move(b))) throw std::runtime_error("commit failed");
      registrations.registered("node-2");
      return 0;
    });
  }

  // What liveness does when node-2 stays silent for a TTL.
  void mark_node2_down() {
    Batch b;
    b.put(node("node-2", on_io([&] { return plane->store.node("node-2")->address; }), domain::NodeStatus::down));
    commit(std::move(b));
  }

  std::future<Unpublished> unpublish(std::string operation_id) {
    return asio::co_spawn(io, [this, operation_id]() -> asio::awaitable<Unpublished> {
      ::csi::v1::ControllerUnpublishVolumeRequest req;
      req.set_volume_id("ext-vol-1");
      req.set_node_id("csi-node-1");
      co_return co_await router->controller_unpublish_volume("csi", "vol-1", req, operation_id);
    }, asio::use_future);
  }

  // vol-1 with a1's claim taken and its publish pending (the intent a dead leader recorded).
  domain::Claim put_pending_claim() {
    auto c = domain::Claim{};
    c.allocation_id = "a1";
    c.node_id = "node-1";
    c.external_node_id = "csi-node-1";
    c.mode = domain::ClaimMode::write;
    c.access_mode = domain::AccessMode::single_node_writer;
    c.attachment_mode = domain::AttachmentMode::file_system;
    c.state = domain::ClaimState::taken;
    c.create_time = domain::now();
    c.update_time = c.create_time;
    c.last_error = kPublishPending;
    c.controller_publish = domain::ControllerPublish::sent;
    Batch b;
    b.put(volume("vol-1", "csi", {c}));
    commit(std::move(b));
    return c;
  }

  std::future<ClaimAnswer> claim_again() {
    return asio::co_spawn(io, [this]() -> asio::awaitable<ClaimAnswer> {
      // A named local: GCC 12 mishandles a class temporary passed by value to a coroutine.
      ClaimInput input{.volume_key = "vol-1",
                       .allocation_id = "a1",
                       .node_id = "node-1",
                       .mode = domain::ClaimMode::write,
                       .access_mode = domain::AccessMode::single_node_writer,
                       .attachment_mode = domain::AttachmentMode::file_system};
      co_return co_await path->claim(std::move(input));
    }, asio::use_future);
  }

  NodeRegistrations registrations;
  std::unique_ptr<agentclient::AgentRouter> router;
  std::unique_ptr<agentclient::RouterPublisher> publisher;
  std::unique_ptr<ClaimPath> path;
};

TEST_F(ResendTest, ACallTheStoppedAgentMissedIsResentToItsNewAddressWithTheSameOperationId) {
  make_router(10s);
  agents.stop("node-2");
  auto call = unpublish("op-1");
  EXPECT_EQ(call.wait_for(300ms), std::future_status::timeout) << "the failed attempt waits for the agent";
  const std::string fresh = agents.start("node-2");
  register_node2(fresh);
  ASSERT_EQ(call.wait_for(5s), std::future_status::ready);
  const auto r = call.get();
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.node_id, "node-2");
  const auto calls = agents["node-2"].calls("ControllerUnpublishVolume");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].operation_id, "op-1");
  EXPECT_EQ(on_io([&] { return router->channel_address("node-2"); }), fresh);
}

// An agent back at the same address (a fixed port) is a new registration all the same: the call
// is resent on a fresh channel, not one still waiting out its reconnect backoff.
TEST_F(ResendTest, AnAgentBackAtTheSameAddressGetsTheCallAgain) {
  make_router(10s);
  const std::string address = on_io([&] { return plane->store.node("node-2")->address; });
  agents.stop("node-2");
  auto call = unpublish("op-2");
  EXPECT_EQ(call.wait_for(300ms), std::future_status::timeout);
  ASSERT_EQ(agents.start("node-2", nullptr, address), address);
  register_node2(address);
  ASSERT_EQ(call.wait_for(5s), std::future_status::ready);
  const auto r = call.get();
  EXPECT_TRUE(r.ok()) << r.error;
  const auto calls = agents["node-2"].calls("ControllerUnpublishVolume");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].operation_id, "op-2");
}

// A node that is really gone keeps the old outcome: marked down while the call waits for it, the
// call ends UNAVAILABLE at once, and nothing is resent.
TEST_F(ResendTest, ANodeMarkedDownWhileTheCallWaitsEndsItUnavailable) {
  make_router(10s);
  agents.stop("node-2");
  const auto started = Clock::now();
  auto call = unpublish("op-3");
  EXPECT_EQ(call.wait_for(300ms), std::future_status::timeout);
  mark_node2_down();
  ASSERT_EQ(call.wait_for(5s), std::future_status::ready);
  const auto r = call.get();
  EXPECT_LT(Clock::now() - started, 5s) << "not the whole wait";
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(r.done());
  EXPECT_NE(r.error.find("via node \"node-2\""), std::string::npos) << r.error;
}

// The agent answered UNAVAILABLE itself ("plugin not running") and was not replaced: an answer,
// not an absence. It stands at once; the agent was asked once.
TEST_F(ResendTest, AnAgentsOwnUnavailableIsNotWaitedOnNorResent) {
  make_router(10s);
  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::UNAVAILABLE, "plugin csi not running on node node-2");
  const auto started = Clock::now();
  const auto r = unpublish("op-4").get();
  EXPECT_LT(Clock::now() - started, 3s);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 1u);
}

// Without the wait (0), an agent that could not be reached and has not registered again leaves
// the call UNAVAILABLE at once, as before.
TEST_F(ResendTest, WithoutAWaitAnUnreachableAgentFailsTheCallAtOnce) {
  make_router(0ms);
  agents.stop("node-2");
  const auto started = Clock::now();
  const auto r = unpublish("op-5").get();
  EXPECT_LT(Clock::now() - started, 3s);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

// The resend checks the new agent as the first call did: over mutual TLS, an agent at the new
// address holding another node's certificate gets no call.
TEST_F(ResendTest, OverMutualTlsTheResendStillNeedsTheNodesOwnCertificate) {
  test::TempDir dir("resend-tls");
  test::TestPki pki(dir / "pki");
  auto load = [](const test::TlsPaths& p) {
    auto s = rpc::TransportSecurity::load({p.ca, p.cert, p.key});
    if (!s) throw std::runtime_error(s.error());
    return *s;
  };
  register_node2(agents.start("node-2", load(pki.agent("node-2"))));
  make_router(2s, load(pki.server()));
  agents.stop("node-2");
  auto call = unpublish("op-6");
  EXPECT_EQ(call.wait_for(300ms), std::future_status::timeout);
  register_node2(agents.start("node-2", load(pki.agent("node-1"))));  // a spoofing agent
  ASSERT_EQ(call.wait_for(10s), std::future_status::ready);
  const auto r = call.get();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.error;
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 0u);
}

// The HA case this is for: a claim whose publish a dead leader sent, claimed again by the node's
// agent while the controller's agent restarts at another port. The publish follows the agent
// with the claim's own operation id, and the claim is granted, not released.
TEST_F(ResendTest, APendingPublishFollowsTheRestartedAgentAndTheClaimIsGranted) {
  make_router(10s);
  const auto pending = put_pending_claim();
  agents.stop("node-2");
  auto answer = claim_again();
  EXPECT_EQ(answer.wait_for(300ms), std::future_status::timeout);
  register_node2(agents.start("node-2"));
  ASSERT_EQ(answer.wait_for(5s), std::future_status::ready);
  const auto a = answer.get();
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(a)) << std::get<ClaimFailure>(a).refusal.message;
  EXPECT_EQ(std::get<GrantedClaim>(a).claim.publish_context.at("device"), "/dev/fake/ext-vol-1");
  const auto calls = agents["node-2"].calls("ControllerPublishVolume");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].operation_id, publish_operation_id("vol-1", "a1", pending));
  const auto stored = claim("vol-1", "a1");
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->state, domain::ClaimState::taken);
  EXPECT_TRUE(stored->last_error.empty()) << stored->last_error;
}

// The agent is not back within the wait: nobody heard the publish and the controller's node is
// not marked down, so the claim keeps waiting for its publish (not released), and the agent's
// next claim, once the controller's agent registered again, sends the same call.
TEST_F(ResendTest, APendingPublishWhoseAgentIsNotBackInTimeKeepsWaitingForTheSameCall) {
  make_router(300ms);
  const auto pending = put_pending_claim();
  agents.stop("node-2");
  const auto first = claim_again().get();
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(first));
  EXPECT_NE(std::get<ClaimFailure>(first).refusal.message.find("retry the claim"), std::string::npos)
      << std::get<ClaimFailure>(first).refusal.message;
  auto stored = claim("vol-1", "a1");
  ASSERT_TRUE(stored);
  EXPECT_TRUE(publish_pending(*stored)) << "released: " << stored->last_error;

  register_node2(agents.start("node-2"));
  const auto again = claim_again().get();
  ASSERT_TRUE(std::holds_alternative<GrantedClaim>(again)) << std::get<ClaimFailure>(again).refusal.message;
  const auto calls = agents["node-2"].calls("ControllerPublishVolume");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].operation_id, publish_operation_id("vol-1", "a1", pending));
}

// The same claim when the controller's node is marked down instead: as before, the publish may
// have happened (the dead leader sent it), so the claim is released with ControllerUnpublish.
TEST_F(ResendTest, APendingPublishToANodeMarkedDownIsReleasedAsBefore) {
  make_router(10s);
  put_pending_claim();
  agents.stop("node-2");
  auto answer = claim_again();
  EXPECT_EQ(answer.wait_for(300ms), std::future_status::timeout);
  mark_node2_down();
  ASSERT_EQ(answer.wait_for(5s), std::future_status::ready);
  const auto a = answer.get();
  ASSERT_TRUE(std::holds_alternative<ClaimFailure>(a));
  EXPECT_EQ(agents["node-2"].count("ControllerPublishVolume"), 0u);
  const auto stored = claim("vol-1", "a1");
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->state, domain::ClaimState::unpublishing);
}

}  // namespace

}  // namespace mooring::controlplane::testing
