// The agent router: controller routing over healthy controllers in node order, per-volume
// serialization, channels that follow a node's address, clear errors when nobody can serve.
#include <gtest/gtest.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/agentclient/router_publisher.hpp"
#include "shared/domain/plugin_facts.hpp"
#include "tests/controlplane/gc/gc_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"
#include "shared/rpc/transport_security.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane::testing {

using Result = agentclient::AgentResult<::csi::v1::ControllerUnpublishVolumeResponse>;

class AgentRouterTest : public GcFixture {
 protected:
  void SetUp() override {
    make_plane();
    Batch b;
    std::vector<domain::Node> nodes;
    for (const auto* n : {"node-1", "node-2", "node-3"}) nodes.push_back(node(n, agents.start(n)));
    fixtures::put_running(b, {plugin("csi", {"node-1"}, {"node-2", "node-3"})}, nullptr, std::move(nodes));
    commit(std::move(b));
  }

  Result unpublish(const std::string& key, const std::string& external_id, const std::string& plugin_id = "csi") {
    return asio::co_spawn(io, [&, key, external_id, plugin_id]() -> asio::awaitable<Result> {
      ::csi::v1::ControllerUnpublishVolumeRequest req;
      req.set_volume_id(external_id);
      req.set_node_id("csi-node-1");
      co_return co_await plane->router.controller_unpublish_volume(plugin_id, key, req);
    }, asio::use_future).get();
  }
};

TEST_F(AgentRouterTest, CandidatesAreHealthyControllersOnReadyNodesInNodeOrder) {
  EXPECT_EQ(on_io([&] { return plane->router.controller_candidates("csi"); }),
            (std::vector<std::string>{"node-2", "node-3"}));
  Batch b;
  b.put(node("node-2", "127.0.0.1:1", domain::NodeStatus::down));
  commit(std::move(b));
  EXPECT_EQ(on_io([&] { return plane->router.controller_candidates("csi"); }), (std::vector<std::string>{"node-3"}));
}

TEST_F(AgentRouterTest, RetryableErrorTriesTheNextControllerFinalErrorDoesNot) {
  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::UNAVAILABLE, "plugin csi not running on node node-2");
  auto ok = unpublish("vol-1", "ext-1");
  EXPECT_TRUE(ok.done()) << ok.error;
  EXPECT_EQ(ok.node_id, "node-3");

  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::INVALID_ARGUMENT, "bad volume id");
  auto bad = unpublish("vol-1", "ext-1");
  EXPECT_FALSE(bad.done());
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.outcome, csi::Outcome::final_error);
  EXPECT_NE(bad.error.find("node-2"), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("bad volume id"), std::string::npos) << bad.error;
  EXPECT_EQ(agents["node-3"].count("ControllerUnpublishVolume"), 1u);  // only the first call reached it
  EXPECT_FALSE(bad.uncertain_earlier);
}

// Controllers with per-node state: NOT_FOUND from the first instance asked is not the answer
// while another healthy instance may hold the volume. It stands only when all of them say it,
// and a failure of another instance leaves the call unfinished, naming every instance asked.
TEST_F(AgentRouterTest, NotFoundIsDoneOnlyWhenEveryHealthyControllerSaysIt) {
  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::NOT_FOUND, "no such volume here");
  auto held_elsewhere = unpublish("vol-1", "ext-1");
  EXPECT_TRUE(held_elsewhere.ok()) << held_elsewhere.error;
  EXPECT_EQ(held_elsewhere.node_id, "node-3");
  EXPECT_EQ(agents["node-3"].count("ControllerUnpublishVolume"), 1u);

  agents["node-3"].fail("ControllerUnpublishVolume", grpc::StatusCode::NOT_FOUND, "no such volume here either");
  auto gone = unpublish("vol-1", "ext-1");
  EXPECT_TRUE(gone.done()) << "every instance agrees: already unpublished";
  EXPECT_EQ(gone.status.error_code(), grpc::StatusCode::NOT_FOUND);

  agents["node-3"].fail("ControllerUnpublishVolume", grpc::StatusCode::UNAVAILABLE, "plugin restarting");
  auto unsure = unpublish("vol-1", "ext-1");
  EXPECT_FALSE(unsure.done()) << "node-3 could not answer; it may hold the volume";
  EXPECT_NE(unsure.error.find("via node \"node-2\": NOT_FOUND"), std::string::npos) << unsure.error;
  EXPECT_NE(unsure.error.find("via node \"node-3\""), std::string::npos) << unsure.error;
}

// A timeout on one controller is remembered even when the next one gives a plain refusal: the
// first may still be acting on the request (a delete must not be taken back then).
TEST_F(AgentRouterTest, AnUncertainAnswerFromAnEarlierControllerIsReported) {
  agents["node-2"].fail("ControllerUnpublishVolume", grpc::StatusCode::DEADLINE_EXCEEDED, "slow");
  agents["node-3"].fail("ControllerUnpublishVolume", grpc::StatusCode::INVALID_ARGUMENT, "bad volume id");
  auto r = unpublish("vol-1", "ext-1");
  EXPECT_EQ(r.outcome, csi::Outcome::final_error);
  EXPECT_EQ(r.node_id, "node-3");
  EXPECT_TRUE(r.uncertain_earlier);
}

// The claim path hears it too: a publish refused by node-3 after node-2 timed out may still
// happen at node-2, so the claim is released, not dropped (ClaimPathTest).
TEST_F(AgentRouterTest, APublishTellsTheClaimPathOfAnEarlierUncertainAnswer) {
  agents["node-2"].fail("ControllerPublishVolume", grpc::StatusCode::DEADLINE_EXCEEDED, "slow");
  agents["node-3"].fail("ControllerPublishVolume", grpc::StatusCode::ALREADY_EXISTS, "published read-write");
  agentclient::RouterPublisher publisher(plane->router);
  auto v = volume("vol-1", "csi");
  auto c = fixtures::claim("a1", "node-1", domain::ClaimState::taken);
  auto r = asio::co_spawn(io, publisher.publish(v, c, "csi-node-1"), asio::use_future).get();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(r.sent);
  EXPECT_TRUE(r.uncertain_earlier);

  agents["node-2"].heal("ControllerPublishVolume");
  agents["node-2"].fail("ControllerPublishVolume", grpc::StatusCode::ALREADY_EXISTS, "published read-write");
  auto plain = asio::co_spawn(io, publisher.publish(v, c, "csi-node-1"), asio::use_future).get();
  EXPECT_EQ(plain.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_FALSE(plain.uncertain_earlier);
}

// Group commit: what the caller decided from must be on disk before anything goes out. When the
// flush fails, nothing is sent and the result says so (not "maybe sent").
TEST_F(AgentRouterTest, NothingGoesOutWhenTheStateItWasDecidedFromIsLost) {
  backend.fail_apply = true;
  auto r = asio::co_spawn(io, [&]() -> asio::awaitable<Result> {
    Batch b;
    b.put(node("node-4", "127.0.0.1:1"));
    EXPECT_TRUE(plane->store.commit(std::move(b)));  // in memory; its flush will fail
    ::csi::v1::ControllerUnpublishVolumeRequest req;
    req.set_volume_id("ext-1");
    co_return co_await plane->router.controller_unpublish_volume("csi", "vol-1", req);
  }, asio::use_future).get();
  backend.fail_apply = false;
  EXPECT_TRUE(r.no_target);
  EXPECT_FALSE(r.done());
  EXPECT_NE(r.error.find("fake: disk full"), std::string::npos) << r.error;
  EXPECT_EQ(agents["node-2"].count("ControllerUnpublishVolume"), 0u);
  EXPECT_EQ(agents["node-3"].count("ControllerUnpublishVolume"), 0u);
  EXPECT_FALSE(on_io([&] { return plane->store.node("node-4") != nullptr; }));  // reloaded from disk
}

TEST_F(AgentRouterTest, NoHealthyControllerIsAClearUnavailable) {
  auto r = unpublish("vol-1", "ext-1", "nope");
  EXPECT_TRUE(r.no_target);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.error.find("no CSI plugin named \"nope\""), std::string::npos) << r.error;

  Batch b;
  auto p = plugin("csi", {"node-1"}, {"node-2", "node-3"});
  for (auto& [n, inst] : p.controllers) inst.healthy = false;
  put_running_on_io(b, p);
  commit(std::move(b));
  r = unpublish("vol-1", "ext-1");
  EXPECT_TRUE(r.no_target);
  EXPECT_NE(r.error.find("no healthy controller"), std::string::npos) << r.error;
  EXPECT_TRUE(agents["node-2"].calls().empty());
}

TEST_F(AgentRouterTest, UnreachableAgentCountsAsRetryable) {
  agents.stop("node-2");
  auto r = unpublish("vol-1", "ext-1");
  EXPECT_TRUE(r.done()) << r.error;
  EXPECT_EQ(r.node_id, "node-3");
}

// Issue 40: an agent nobody can connect to is said to be so — never gRPC's transport text
// ("failed to connect to all addresses ... Connection refused") — and the answer is UNAVAILABLE
// (the API's 503 with Retry-After).
TEST_F(AgentRouterTest, AnAgentThatCannotBeReachedIsSaidToBeNotConnected) {
  agents.stop("node-2");
  agents.stop("node-3");
  auto r = unpublish("vol-1", "ext-1");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.error.find("the agent of node \"node-2\" is not connected"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("the agent of node \"node-3\" is not connected"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find("onnection refused"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find("failed to connect"), std::string::npos) << r.error;
}

// A node call (stats, expand) to a node whose agent is not connected: UNAVAILABLE saying so.
TEST_F(AgentRouterTest, ANodeCallToAnAgentThatIsNotConnectedSaysSo) {
  agents.stop("node-1");
  auto r = asio::co_spawn(io, [&]() -> asio::awaitable<agentclient::AgentResult<v1::NodeVolumeStatsResponse>> {
    v1::NodeVolumeStatsRequest req;
    req.set_volume_id("vol-1");
    co_return co_await plane->router.node_volume_stats("node-1", req);
  }, asio::use_future).get();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.unreached);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(r.error, "NodeVolumeStats of volume \"vol-1\" on node \"node-1\": the agent of node \"node-1\" is not "
                     "connected (restarting, or unreachable); retry shortly");
}

// After a control plane restart every controller's health is unknown until its agent is heard
// from: nothing is sent, and the reason says to wait, not that the plugin is broken.
TEST_F(AgentRouterTest, WhileNoControllersHealthIsKnownTheReasonSaysItIsNotKnownYet) {
  Batch b;
  auto p = plugin("csi", {"node-1"}, {"node-2", "node-3"});
  for (auto& [n, inst] : p.controllers) {
    inst.healthy = false;
    inst.health_description = std::string(domain::kHealthUnknown);
  }
  put_running_on_io(b, p);
  commit(std::move(b));
  auto r = unpublish("vol-1", "ext-1");
  EXPECT_TRUE(r.no_target);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.error.find("whether its controllers are healthy is not known yet"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("agents of nodes \"node-2\", \"node-3\""), std::string::npos) << r.error;
  EXPECT_TRUE(agents["node-2"].calls().empty());
  EXPECT_TRUE(agents["node-3"].calls().empty());
}

TEST_F(AgentRouterTest, ControllerCallsSerializePerVolumeAndRunInParallelAcrossVolumes) {
  agents["node-2"].delay("ControllerUnpublishVolume", 200ms);
  auto started = std::chrono::steady_clock::now();
  auto done = asio::co_spawn(io, [&]() -> asio::awaitable<int> {
    async::TaskGroup group(co_await asio::this_coro::executor, "calls");
    int ok = 0;
    for (int i = 0; i < 3; ++i)
      for (const auto* vol : {"a", "b"})
        group.spawn("call", [&, vol]() -> asio::awaitable<void> {
          ::csi::v1::ControllerUnpublishVolumeRequest req;
          req.set_volume_id(std::string("ext-") + vol);
          auto r = co_await plane->router.controller_unpublish_volume("csi", vol, req);
          if (r.done()) ++ok;
        });
    co_await group.join();
    co_return ok;
  }, asio::use_future);
  EXPECT_EQ(done.get(), 6);
  auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(agents["node-2"].max_in_flight_per_volume(), 1);
  EXPECT_EQ(agents["node-2"].max_in_flight("ControllerUnpublishVolume"), 2);
  EXPECT_LT(elapsed, 6 * 200ms);  // three rounds of two, not six in a row
}

// A group snapshot is one operation on every member volume: it takes each member's lock (in key
// order, so two groups sharing volumes cannot deadlock) before the call goes out.
TEST_F(AgentRouterTest, AGroupSnapshotCreateWaitsForEveryMemberVolumesLock) {
  auto seen = asio::co_spawn(io, [&]() -> asio::awaitable<std::pair<bool, bool>> {
    auto held = co_await plane->router.locks().lock("b");
    bool finished = false;
    async::TaskGroup group(co_await asio::this_coro::executor, "calls");
    group.spawn("group", [&]() -> asio::awaitable<void> {
      std::string plugin_id = "csi";
      std::vector<std::string> keys{"b", "a"};
      ::csi::v1::CreateVolumeGroupSnapshotRequest req;
      req.set_name("g");
      (void)co_await plane->router.create_volume_group_snapshot(plugin_id, keys, req);
      finished = true;
    });
    asio::steady_timer wait(co_await asio::this_coro::executor, 100ms);
    co_await wait.async_wait(asio::use_awaitable);
    const bool waiting = !finished && plane->router.locks().locked("a");
    held.unlock();
    co_await group.join();
    co_return std::make_pair(waiting, finished);
  }, asio::use_future).get();
  EXPECT_TRUE(seen.first) << "the create went out while member \"b\" was held";
  EXPECT_TRUE(seen.second);
}

TEST_F(AgentRouterTest, ChannelFollowsTheNodesAddress) {
  agents.stop("node-2");
  agents.stop("node-3");
  auto r = unpublish("vol-1", "ext-1");
  EXPECT_FALSE(r.done());
  auto old_address = on_io([&] { return plane->router.channel_address("node-2"); });
  ASSERT_TRUE(old_address);

  // The agent restarts on another port and re-registers with its new address (and the plugin
  // instances it runs, as a registration carries them: the controller stays node-2's).
  std::string fresh = agents.start("node-2");
  auto moved = on_io([&] { return *plane->store.node("node-2"); });
  moved.address = fresh;
  Batch b;
  b.put(std::move(moved));
  commit(std::move(b));
  r = unpublish("vol-1", "ext-1");
  EXPECT_TRUE(r.done()) << r.error;
  EXPECT_EQ(on_io([&] { return plane->router.channel_address("node-2"); }), fresh);
  EXPECT_EQ(on_io([&] { return plane->router.channel_count(); }), 2u);
}

TEST_F(AgentRouterTest, NodeRpcGoesToTheNamedNode) {
  auto r = asio::co_spawn(io, [&]() -> asio::awaitable<agentclient::AgentResult<v1::NodeDetachVolumeResponse>> {
    v1::NodeDetachVolumeRequest req;
    req.set_volume_id("vol-1");
    co_return co_await plane->router.node_detach_volume("node-1", req);
  }, asio::use_future).get();
  EXPECT_TRUE(r.done()) << r.error;
  EXPECT_EQ(agents["node-1"].count("NodeDetachVolume"), 1u);

  auto missing = asio::co_spawn(io, [&]() -> asio::awaitable<agentclient::AgentResult<v1::NodeDetachVolumeResponse>> {
    std::string node_id = "node-9";
    v1::NodeDetachVolumeRequest req;
    co_return co_await plane->router.node_detach_volume(node_id, req);
  }, asio::use_future).get();
  EXPECT_TRUE(missing.no_target);
  EXPECT_NE(missing.error.find("node \"node-9\" is not registered"), std::string::npos) << missing.error;
}

// With mutual TLS the control plane talks to a node's agent only when the agent's certificate
// names that node: an agent (or anyone) at the registered address holding another node's
// certificate gets no call.
TEST_F(AgentRouterTest, OverMutualTlsOnlyTheNodesOwnCertificateIsTrusted) {
  test::TempDir dir("router-tls");
  test::TestPki pki(dir / "pki");
  auto load = [](const test::TlsPaths& p) {
    auto s = rpc::TransportSecurity::load({p.ca, p.cert, p.key});
    if (!s) throw std::runtime_error(s.error());
    return *s;
  };
  // node-2's address answers with node-1's certificate; node-3's with its own.
  const auto spoofed = agents.start("node-2", load(pki.agent("node-1")));
  const auto genuine = agents.start("node-3", load(pki.agent("node-3")));
  Batch b;
  b.put(node("node-2", spoofed));
  b.put(node("node-3", genuine));
  commit(std::move(b));
  auto router = on_io([&] {
    return std::make_unique<agentclient::AgentRouter>(
        io.get_executor(), plane->store,
        // Generous: with 3 s it failed once on a loaded 2-core machine under ASan.
        agentclient::AgentRouterOptions{.channel = {.security = load(pki.server())}, .timeout_override = 15s});
  });
  auto detach = [&](const std::string& node_id) {
    return asio::co_spawn(io, [&, node_id]() -> asio::awaitable<agentclient::AgentResult<v1::NodeDetachVolumeResponse>> {
      v1::NodeDetachVolumeRequest req;
      req.set_volume_id("vol-1");
      co_return co_await router->node_detach_volume(node_id, req);
    }, asio::use_future).get();
  };
  auto refused = detach("node-2");
  EXPECT_FALSE(refused.done());
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error;
  EXPECT_EQ(agents["node-2"].count("NodeDetachVolume"), 0u);
  auto served = detach("node-3");
  EXPECT_TRUE(served.done()) << served.error;
  EXPECT_EQ(agents["node-3"].count("NodeDetachVolume"), 1u);
  on_io([&] {
    router.reset();
    return 0;
  });
}

// The fencing token (domain/leader_epoch.hpp): every attempt carries the epoch the router reads
// as it goes out, so an agent can refuse a deposed leader's call; a single control plane sends none.
TEST_F(AgentRouterTest, EveryCallCarriesTheLeaderEpochReadAsItGoesOut) {
  std::optional<domain::LeaderEpoch> epoch = domain::LeaderEpoch{.cluster = 0xabc, .revision = 41};
  auto router = on_io([&] {
    return std::make_unique<agentclient::AgentRouter>(
        io.get_executor(), plane->store,
        agentclient::AgentRouterOptions{.timeout_override = 3s, .leader_epoch = [&] { return epoch; }});
  });
  auto detach = [&] {
    return asio::co_spawn(io, [&]() -> asio::awaitable<agentclient::AgentResult<v1::NodeDetachVolumeResponse>> {
      v1::NodeDetachVolumeRequest req;
      req.set_volume_id("vol-1");
      co_return co_await router->node_detach_volume("node-1", req);
    }, asio::use_future).get();
  };
  EXPECT_TRUE(detach().done());
  epoch = domain::LeaderEpoch{.cluster = 0xabc, .revision = 57};
  EXPECT_TRUE(detach().done());
  epoch.reset();
  EXPECT_TRUE(detach().done());
  auto controller = asio::co_spawn(io, [&]() -> asio::awaitable<Result> {
    epoch = domain::LeaderEpoch{.cluster = 0xabc, .revision = 58};
    ::csi::v1::ControllerUnpublishVolumeRequest req;
    req.set_volume_id("ext-1");
    req.set_node_id("csi-node-1");
    co_return co_await router->controller_unpublish_volume("csi", "vol-1", req);
  }, asio::use_future).get();
  EXPECT_TRUE(controller.done()) << controller.error;
  const auto detaches = agents["node-1"].calls("NodeDetachVolume");
  ASSERT_EQ(detaches.size(), 3u);
  EXPECT_EQ(detaches[0].leader_epoch, "abc/41");
  EXPECT_EQ(detaches[1].leader_epoch, "abc/57");
  EXPECT_EQ(detaches[2].leader_epoch, "");
  const auto unpublishes = agents["node-2"].calls("ControllerUnpublishVolume");
  ASSERT_EQ(unpublishes.size(), 1u);
  EXPECT_EQ(unpublishes[0].leader_epoch, "abc/58");
  // The fixture's router (no epoch option) sends none.
  EXPECT_TRUE(unpublish("vol-2", "ext-2").done());
  EXPECT_EQ(agents["node-2"].calls("ControllerUnpublishVolume").back().leader_epoch, "");
  on_io([&] {
    router.reset();
    return 0;
  });
}

}  // namespace mooring::controlplane::testing
