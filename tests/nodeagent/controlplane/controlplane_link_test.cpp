// The registration link against HA control planes (fakes: standbys answer UNAVAILABLE naming the
// leader, or nobody before one is elected): one round asks every control plane, a standby's
// redirect is followed at once, and after a long spell without a leader the new one is reached
// within about a second of its election, not when a grown backoff ends.
#include "services/nodeagent/controlplane/controlplane_link.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

#include "services/nodeagent/controlplane/node_status.hpp"
#include "shared/async/task_group.hpp"
#include "tests/nodeagent/support/fake_controlplane.hpp"
#include "tests/nodeagent/support/run_async.hpp"
#include "tests/support/files.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The link running on a test io_context, with every contact it reports counted.
struct RunningLink {
  explicit RunningLink(const std::string& addresses,
                       std::chrono::milliseconds heartbeat_interval = LinkOptions{}.heartbeat_interval) {
    LinkOptions o;
    o.heartbeat_interval = heartbeat_interval;
    o.node_id = "node-1";
    o.node_name = "node-1";
    o.advertise_addr = "127.0.0.1:1";
    o.controlplane_addr = addresses;
    o.call_timeout = 2s;
    o.on_contact = [this](bool answered) { ++(answered ? answered_ : refused_); };
    o.on_leader_epoch = [this](const domain::LeaderEpoch& e) { epochs.push_back(e); };
    link = std::make_unique<ControlPlaneLink>(io.get_executor(), o, status);
    tasks.spawn("link", link->run());
  }
  ~RunningLink() {
    tasks.cancel();
    run_async(io, [&]() -> asio::awaitable<void> { co_await tasks.join(); });
  }
  // Runs the link until it registered; how long that took (nullopt: not within `limit`).
  std::optional<Clock::duration> until_registered(std::chrono::milliseconds limit) {
    const auto from = Clock::now();
    if (!test::wait_until(
            [&] {
              run_for(io, 10ms);
              return link->registered();
            },
            limit, 1ms))
      return std::nullopt;
    return Clock::now() - from;
  }

  asio::io_context io;
  NodeStatus status;
  std::unique_ptr<ControlPlaneLink> link;
  async::TaskGroup tasks{io.get_executor(), "test"};
  int answered_ = 0;
  int refused_ = 0;
  std::vector<domain::LeaderEpoch> epochs;  // as the answers named them
};

TEST(ControlPlaneLink, OneRoundAsksEveryControlPlaneUntilTheLeaderAnswers) {
  FakeControlPlane a, b, leader;
  a.set_standby("");  // not told who leads yet
  b.set_standby("");
  RunningLink run(a.address() + "," + b.address() + "," + leader.address());
  ASSERT_TRUE(run.until_registered(10s));
  EXPECT_EQ(run.refused_, 0) << "the first round reached the leader: no failed contact";
  EXPECT_EQ(leader.registrations().size(), 1u);
}

TEST(ControlPlaneLink, AStandbyNamingTheLeaderSendsTheCallThereAtOnce) {
  FakeControlPlane standby, leader;
  standby.set_standby(leader.address());
  RunningLink run(standby.address() + "," + leader.address());
  ASSERT_TRUE(run.until_registered(10s));
  EXPECT_EQ(run.refused_, 0);
  EXPECT_TRUE(standby.registrations().empty());
  EXPECT_EQ(leader.registrations().size(), 1u);
}

// The CI run this pins: no member led for a while, the agent's backoff had grown (0.5, 1, 2, 4,
// 8 s, less up to 20 % jitter: after 8 s of refusals its next round came 4.4-7.5 s later) and it
// reached the new leader 10 s late. Now the rounds are at most 1 s apart whatever the spell's
// length.
TEST(ControlPlaneLink, ANewLeaderIsReachedWithinAboutASecondAfterALongSpellWithoutOne) {
  FakeControlPlane a, b;
  a.set_standby("");
  b.set_standby("");
  RunningLink run(a.address() + "," + b.address());
  EXPECT_FALSE(run.until_registered(8s)) << "nobody leads";
  EXPECT_GT(run.refused_, 4);
  b.set_standby(std::nullopt);  // b is elected; a names it from its next read of the leader key
  a.set_standby(b.address());
  const auto took = run.until_registered(10s);
  ASSERT_TRUE(took);
  EXPECT_LT(*took, 2s) << std::chrono::duration_cast<std::chrono::milliseconds>(*took).count() << " ms";
  EXPECT_TRUE(a.registrations().empty());
  EXPECT_EQ(b.registrations().size(), 1u);
}

// A control plane with a fleet larger than its heartbeat budget asks each agent to heartbeat less
// often (liveness.hpp, heartbeat_pace): the agent's own shorter interval gives way to it, and
// follows again once the control plane stops asking.
TEST(ControlPlaneLink, TheAgentHeartbeatsNoMoreOftenThanTheControlPlaneAsks) {
  FakeControlPlane cp;
  cp.set_pace(10s, 500ms);
  RunningLink run(cp.address(), 50ms);
  ASSERT_TRUE(run.until_registered(10s));
  auto count_for = [&](std::chrono::milliseconds span) {
    const auto before = cp.heartbeats().size();
    const auto until = Clock::now() + span;
    while (Clock::now() < until) run_for(run.io, 10ms);
    return cp.heartbeats().size() - before;
  };
  const auto paced = count_for(2s);
  EXPECT_GE(paced, 2u);
  EXPECT_LE(paced, 5u) << "every 500 ms: 4 in 2 s";
  cp.set_pace(10s, 0ms);
  count_for(600ms);  // the paced wait in progress ends
  const auto own = count_for(2s);
  EXPECT_GE(own, 6u) << "every 50 ms but at least 200 ms apart (min_heartbeat_gap): about 10 in 2 s";
}

// The fencing token: the epoch the leader's answers name reaches the agent's fence
// (rpcserver/leader_fence.hpp); an answer that names none is not passed on.
TEST(ControlPlaneLink, TheLeaderEpochOfEveryAnswerIsPassedOn) {
  FakeControlPlane cp;
  RunningLink run(cp.address(), 50ms);
  ASSERT_TRUE(run.until_registered(10s));
  for (int i = 0; i < 30; ++i) run_for(run.io, 10ms);
  EXPECT_TRUE(run.epochs.empty());
  cp.set_leader_epoch(std::pair<std::uint64_t, std::int64_t>{0xabc, 9});
  ASSERT_TRUE(test::wait_until(
      [&] {
        run_for(run.io, 10ms);
        return !run.epochs.empty();
      },
      5s, 1ms));
  EXPECT_EQ(run.epochs.back(), (domain::LeaderEpoch{.cluster = 0xabc, .revision = 9}));
}

}  // namespace
}  // namespace mooring::nodeagent
