// Liveness: a node silent for the TTL goes down once (event recorded, plugin unhealthy); nodes
// get one TTL of grace after a restart; the loop runs in a task group and stops on cancel.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/controlplane/nodes/liveness.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/task_group.hpp"
#include "shared/domain/plugin_facts.hpp"
#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane {

using namespace std::chrono_literals;
using Clock = NodeLiveness::Clock;

namespace {

domain::Node node(std::string id, domain::NodeStatus status = domain::NodeStatus::ready) {
  domain::Node n;
  n.id = std::move(id);
  n.status = status;
  return n;
}

}  // namespace

class LivenessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store.load());
    Batch b;
    auto n1 = node("n1");
    auto p = fixtures::plugin("hostpath", "n1");
    n1.plugins["hostpath"] = p.nodes.at("n1");
    b.put(n1);  // carries the plugin's instance: the aggregate follows
    b.put(node("n2"));
    b.put(node("gone", domain::NodeStatus::down));
    ASSERT_TRUE(store.commit(std::move(b)));
  }
  boost::asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
};

TEST_F(LivenessTest, NodesGetOneTtlOfGraceAfterStartThenGoDown) {
  NodeLiveness live(store, {.ttl = 10s});
  auto start = Clock::now();
  EXPECT_TRUE(live.check(start + 5s).empty());
  live.seen("n2", start + 8s);
  auto down = live.check(start + 11s);
  ASSERT_EQ(down, std::vector<std::string>{"n1"});
  EXPECT_EQ(store.node("n1")->status, domain::NodeStatus::down);
  EXPECT_EQ(store.node("n2")->status, domain::NodeStatus::ready);
  EXPECT_EQ(store.plugin("hostpath")->nodes_healthy, 0);
  EXPECT_FALSE(store.node("n1")->plugins.at("hostpath").healthy);
  ASSERT_FALSE(store.node("n1")->events.empty());
  EXPECT_NE(store.node("n1")->events.back().message.find("no heartbeat"), std::string::npos);
  bool event = false;
  for (const auto& e : store.events()) event |= e.type == "NodeDown" && e.key == "n1";
  EXPECT_TRUE(event);

  // Marked once: a second check writes nothing.
  auto writes = backend.transactions.size();
  EXPECT_TRUE(live.check(start + 12s).empty());
  EXPECT_EQ(backend.transactions.size(), writes);
  EXPECT_EQ(live.check(start + 19s), std::vector<std::string>{"n2"});
}

// HA: while the leader's lease is unconfirmed (etcd electing its own raft leader) heartbeats are
// held, not heard; nobody is marked down then, and everyone gets a TTL once it hears again.
TEST_F(LivenessTest, NobodyGoesDownWhileTheLeaderCannotHearAndEveryNodeGetsATtlAfter) {
  bool hearing = true;
  NodeLiveness live(store, {.ttl = 10s, .hearing = [&] { return hearing; }});
  auto start = Clock::now();
  live.seen("n1", start + 1s);
  live.seen("n2", start + 1s);
  hearing = false;
  EXPECT_TRUE(live.check(start + 12s).empty()) << "marked down while deaf";
  EXPECT_TRUE(live.check(start + 14s).empty());
  hearing = true;
  EXPECT_TRUE(live.check(start + 15s).empty()) << "the held heartbeats get their TTL first";
  live.seen("n2", start + 16s);
  EXPECT_TRUE(live.check(start + 24s).empty());
  EXPECT_EQ(live.check(start + 26s), std::vector<std::string>{"n1"});  // silent a TTL after hearing again
  EXPECT_EQ(store.node("n2")->status, domain::NodeStatus::ready);
}

// A heartbeat whose answer waits for its commit (etcd between raft leaders) keeps its node alive
// until the agent has the answer, and a TTL from then.
TEST_F(LivenessTest, ANodeWaitingForOurAnswerIsNotSilent) {
  NodeLiveness live(store, {.ttl = 10s});
  auto start = Clock::now();
  live.seen("n2", start + 100s);
  live.arrived("n1", start + 1s);
  EXPECT_TRUE(live.check(start + 20s).empty()) << "marked down while its heartbeat waits for us";
  live.answered("n1", start + 25s);
  EXPECT_TRUE(live.check(start + 34s).empty());
  EXPECT_EQ(live.check(start + 36s), std::vector<std::string>{"n1"});
  live.answered("n2", start + 200s);  // never arrived: nothing changes
  EXPECT_EQ(live.check(start + 111s), std::vector<std::string>{"n2"});
}

// What GET /v1/node/:id shows as LastHeartbeat: the wall-clock time of the last heartbeat heard.
TEST_F(LivenessTest, LastHeardIsTheWallClockTimeOfTheLastHeartbeat) {
  NodeLiveness live(store, {.ttl = 10s});
  EXPECT_FALSE(live.last_heard("n1")) << "not heard since this process started";
  const auto now = Clock::now();
  live.seen("n1", now - 3s);
  const auto wall = domain::now();
  auto heard = live.last_heard("n1", now);
  ASSERT_TRUE(heard);
  EXPECT_LE(*heard, wall - 3s + 50ms);
  EXPECT_GE(*heard, wall - 3s - 50ms);
  live.arrived("n1", now - 1s);
  EXPECT_GE(*live.last_heard("n1", now), wall - 1s - 50ms);
  live.grant_grace(now);
  EXPECT_FALSE(live.last_heard("n1")) << "a new term starts with no memory";
}

TEST_F(LivenessTest, GraceGrantedAgainCountsFromThenForEveryNode) {
  NodeLiveness live(store, {.ttl = 10s});
  auto start = Clock::now();
  live.seen("n2", start + 1s);
  live.grant_grace(start + 30s);  // a degraded leader leads again: nobody could heartbeat meanwhile
  EXPECT_TRUE(live.check(start + 35s).empty());
  EXPECT_EQ(live.check(start + 41s), (std::vector<std::string>{"n1", "n2"}));
}

TEST_F(LivenessTest, AFailedWriteIsRetriedOnTheNextCheck) {
  NodeLiveness live(store, {.ttl = 1s});
  auto start = Clock::now();
  live.seen("n2", start + 1h);
  backend.fail_apply = true;
  EXPECT_TRUE(live.check(start + 2s).empty());
  EXPECT_EQ(store.node("n1")->status, domain::NodeStatus::ready);
  backend.fail_apply = false;
  EXPECT_EQ(live.check(start + 3s), std::vector<std::string>{"n1"});
}

// Issue 40: at the start of leading, the plugins of every node not heard from yet count as
// unknown (the API and the controller routing stop trusting the stored "healthy"); a node heard
// from first keeps what it reported.
TEST_F(LivenessTest, LeadingMarksThePluginsOfNodesNotHeardFromUnknown) {
  NodeLiveness live(store, {.ttl = 10s});
  live.unknown_until_heard();
  const auto& inst = store.plugin("hostpath")->nodes.at("n1");
  EXPECT_TRUE(domain::health_unknown(inst)) << inst.health_description;
  EXPECT_EQ(store.plugin("hostpath")->nodes_healthy, 0);
  EXPECT_TRUE(domain::health_unknown(store.node("n1")->plugins.at("hostpath")));
  EXPECT_EQ(store.node("n1")->status, domain::NodeStatus::ready);
}

TEST_F(LivenessTest, ANodeHeardFromBeforeTheMarkKeepsWhatItReported) {
  NodeLiveness live(store, {.ttl = 10s});
  live.seen("n1");
  const auto before = store.index();
  live.unknown_until_heard();
  EXPECT_TRUE(store.plugin("hostpath")->nodes.at("n1").healthy);
  EXPECT_EQ(store.index(), before) << "nothing to write";
}

TEST_F(LivenessTest, AFailedUnknownMarkIsRetriedOnTheNextCheck) {
  NodeLiveness live(store, {.ttl = 10s});
  backend.fail_apply = true;
  live.unknown_until_heard();
  EXPECT_TRUE(store.plugin("hostpath")->nodes.at("n1").healthy);
  backend.fail_apply = false;
  live.check(Clock::now());
  EXPECT_TRUE(domain::health_unknown(store.plugin("hostpath")->nodes.at("n1")));
}

// The loop looks often enough that a silent node is down within TTL + half a second at the
// default TTL (issue 46's target is TTL + 1 s; the period's jitter and the commit come on top),
// and never busier than every 20 ms.
TEST(LivenessPeriod, ASilentNodeIsSeenWithinHalfASecondOfItsTtl) {
  EXPECT_EQ(default_check_period(10s), 500ms);
  EXPECT_EQ(default_check_period(std::chrono::milliseconds(std::chrono::hours(1))), 500ms);
  EXPECT_EQ(default_check_period(2s), 100ms);
  EXPECT_EQ(default_check_period(100ms), 20ms);
}

// The heartbeat budget: a fleet that fits it keeps the configured TTL and the agents' own pace;
// past it, one heartbeat per node every nodes / budget and a TTL of three such intervals.
TEST(HeartbeatPace, ALargerFleetThanTheBudgetIsPacedAndItsTtlGrowsWithIt) {
  const LivenessOptions o{.ttl = 10s, .max_heartbeats_per_second = 1000};
  EXPECT_EQ(heartbeat_pace(1, o), (HeartbeatPace{10s, 0ms}));
  EXPECT_EQ(heartbeat_pace(3333, o), (HeartbeatPace{10s, 0ms}));  // every 3.333 s: 1000/s
  EXPECT_EQ(heartbeat_pace(3334, o), (HeartbeatPace{10002ms, 3334ms}));
  EXPECT_EQ(heartbeat_pace(5000, o), (HeartbeatPace{15s, 5s}));
  EXPECT_EQ(heartbeat_pace(10000, o), (HeartbeatPace{30s, 10s}));
  EXPECT_EQ(heartbeat_pace(10000, {.ttl = 10s}), (HeartbeatPace{10s, 0ms}));  // no budget
  EXPECT_EQ(heartbeat_pace(7, {.ttl = 60s, .max_heartbeats_per_second = 1}), (HeartbeatPace{60s, 0ms}));
}

// Each node is judged by the TTL it was told at its last heartbeat: when the fleet shrinks, a node
// told the longer TTL is not marked down before it, and one told the shorter is held to it.
TEST_F(LivenessTest, EachNodeIsJudgedByTheTtlItWasToldAtItsLastHeartbeat) {
  // Three nodes at one heartbeat per second: every 3 s, a TTL of 9 s.
  NodeLiveness live(store, {.ttl = 1500ms, .max_heartbeats_per_second = 1});
  EXPECT_EQ(live.pace(), (HeartbeatPace{9s, 3s}));
  auto start = Clock::now();
  live.seen("n1", start);
  live.seen("n2", start);
  Batch b;
  b.erase_node("gone");
  ASSERT_TRUE(store.commit(std::move(b)));
  EXPECT_EQ(live.pace(), (HeartbeatPace{6s, 2s}));  // two nodes
  live.arrived("n2", start + 4s);                   // told 6 s now
  live.answered("n2", start + 4s);
  EXPECT_TRUE(live.check(start + 8500ms).empty()) << "n1 was told 9 s";
  EXPECT_EQ(live.check(start + 9100ms), std::vector<std::string>{"n1"});
  EXPECT_TRUE(live.check(start + 9900ms).empty());
  EXPECT_EQ(live.check(start + 10100ms), std::vector<std::string>{"n2"});
  EXPECT_NE(store.node("n2")->events.back().message.find("(TTL 6s)"), std::string::npos)
      << store.node("n2")->events.back().message;
}

TEST_F(LivenessTest, LoopMarksSilentNodesDownAndStopsOnCancel) {
  NodeLiveness live(store, {.ttl = 100ms});
  async::TaskGroup tasks(io.get_executor(), "test");
  tasks.spawn("liveness", [&] { return live.run(); });
  // Keep n2 alive from a second task until n1 is down.
  bool n1_down = false;
  tasks.spawn("watch", [&]() -> boost::asio::awaitable<void> {
    while (!n1_down) {
      live.seen("n2");
      boost::asio::steady_timer t(io, 20ms);
      co_await t.async_wait(boost::asio::use_awaitable);
      n1_down = store.node("n1")->status == domain::NodeStatus::down;
    }
    tasks.cancel();
  });
  io.run_for(10s);
  EXPECT_TRUE(n1_down);
  EXPECT_EQ(store.node("n2")->status, domain::NodeStatus::ready);
  EXPECT_EQ(tasks.size(), 0u);
}

}  // namespace mooring::controlplane
