// The allocation set: runners start for new allocations, stop on desired=stop, are removed once
// the control plane lists them terminal; the client-side disconnect rule stops allocations with
// StopAfterClientDisconnect; restore() picks up allocations from the data dir. The watch asks
// with the bodies it holds and applies answers that name the unchanged ones by id only.
#include "services/nodeagent/allocrunner/alloc_manager.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "shared/async/wake_signal.hpp"
#include "shared/wire/proto_convert.hpp"
#include "tests/nodeagent/support/fake_controlplane_calls.hpp"
#include "tests/nodeagent/support/fake_volume_mounter.hpp"
#include "tests/nodeagent/support/run_async.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;
using namespace std::chrono_literals;
using domain::ClientStatus;
using Known = std::map<std::string, std::uint64_t>;

Known known_of(const v1::WatchAllocationsRequest& req) { return {req.known().begin(), req.known().end()}; }

v1::WatchAllocationsResponse answer(std::uint64_t index, std::uint64_t incarnation,
                                    const std::vector<domain::Allocation>& in_full,
                                    const std::vector<std::pair<std::string, std::uint64_t>>& unchanged = {}) {
  v1::WatchAllocationsResponse r;
  r.set_index(index);
  r.set_incarnation(incarnation);
  for (const auto& a : in_full) *r.add_allocations() = domain::to_proto(a);
  for (const auto& [id, modify_index] : unchanged) {
    auto& u = *r.add_unchanged();
    u.set_id(id);
    u.set_modify_index(modify_index);
  }
  return r;
}

struct NullSink final : AllocStatusSink {
  std::map<std::string, ClientStatus> last;
  void report(const std::string& id, ClientStatus s, std::vector<domain::TaskEvent>) override { last[id] = s; }
};

class AllocManagerTest : public ::testing::Test {
 protected:
  std::unique_ptr<AllocManager> make_manager() {
    AllocManagerOptions o;
    o.node_id = "n1";
    o.state_dir = dir / "allocs";
    o.csi.claim_backoff = async::Backoff{5ms, 20ms, 2.0, 0.0, 60s};
    o.watch_wait = 50ms;
    o.watch_backoff = async::Backoff{5ms, 20ms, 2.0, 0.0};
    return std::make_unique<AllocManager>(io.get_executor(), cp, mounter, sink, o);
  }
  static domain::Allocation holder(const std::string& id, domain::Duration stop_after = domain::Duration{0},
                                   std::uint64_t modify_index = 0) {
    domain::Allocation a;
    a.id = id;
    a.modify_index = modify_index;
    a.node_id = "n1";
    a.stop_after_client_disconnect = stop_after;
    domain::VolumeRequest r;
    r.name = "data";
    r.source = "vol-" + id;
    r.access_mode = domain::AccessMode::single_node_writer;
    r.attachment_mode = domain::AttachmentMode::file_system;
    a.volumes["data"] = r;
    return a;
  }
  bool settle(const std::function<bool()>& pred) {
    return test::wait_until(
        [&] {
          run_for(io, 10ms);
          return pred();
        },
        10s);
  }
  void shutdown(AllocManager& m) {
    run_async(io, [&]() -> asio::awaitable<void> { co_await m.shutdown(); });
  }

  test::TempDir dir{"alloc-manager"};
  asio::io_context io;
  FakeControlPlaneCalls cp;
  FakeVolumeMounter mounter;
  NullSink sink;
};

TEST_F(AllocManagerTest, StartsStopsAndCollectsRunners) {
  auto m = make_manager();
  auto a = holder("a1");
  auto other_node = holder("a2");
  other_node.node_id = "n2";
  m->apply({a, other_node});
  ASSERT_TRUE(settle([&] { return m->runner("a1") && m->runner("a1")->client_status() == ClientStatus::running; }));
  EXPECT_EQ(m->runner("a2"), nullptr);
  a.desired_status = domain::DesiredStatus::stop;
  m->apply({a});
  ASSERT_TRUE(settle([&] { return m->runner("a1")->finished(); }));
  EXPECT_EQ(m->runner("a1")->client_status(), ClientStatus::complete);
  EXPECT_EQ(mounter.releases.size(), 1u);
  // The control plane has not seen the terminal status yet: the runner stays.
  m->apply({a});
  EXPECT_NE(m->runner("a1"), nullptr);
  a.client_status = ClientStatus::complete;
  m->apply({a});
  EXPECT_EQ(m->runner("a1"), nullptr);
  // Its removal is queued behind its state writes (AllocStateStore's writer thread).
  EXPECT_TRUE(settle([&] { return !std::filesystem::exists(dir / "allocs" / "a1"); }));
  shutdown(*m);
}

TEST_F(AllocManagerTest, StopForAnAllocationNeverSeenIsReportedComplete) {
  auto m = make_manager();
  auto a = holder("a1");
  a.desired_status = domain::DesiredStatus::stop;
  m->apply({a});
  EXPECT_EQ(m->runner("a1"), nullptr);
  EXPECT_EQ(sink.last["a1"], ClientStatus::complete);
  shutdown(*m);
}

TEST_F(AllocManagerTest, DisconnectLongerThanStopAfterStopsOnlyThoseAllocations) {
  auto m = make_manager();
  m->apply({holder("short", domain::Duration{2000}), holder("never")});
  ASSERT_TRUE(settle([&] {
    return m->runner("short")->client_status() == ClientStatus::running &&
           m->runner("never")->client_status() == ClientStatus::running;
  }));
  m->check_disconnect(std::chrono::steady_clock::now(), 1s);
  run_for(io, 50ms);
  EXPECT_FALSE(m->runner("short")->stop_requested());
  m->check_disconnect(std::chrono::steady_clock::now(), 3s);
  ASSERT_TRUE(settle([&] { return m->runner("short")->finished(); }));
  EXPECT_EQ(m->runner("short")->client_status(), ClientStatus::complete);
  EXPECT_NE(m->runner("short")->state().stop_reason.find("no contact with the control plane"), std::string::npos);
  EXPECT_FALSE(m->runner("never")->stop_requested());
  ASSERT_EQ(mounter.releases.size(), 1u);
  EXPECT_EQ(mounter.releases[0].first, "short");
  shutdown(*m);
}

// Once the control plane has answered a heartbeat, the rule counts from when that heartbeat was
// SENT (not from the last answer of any call), and the stop's SIGKILL comes a margin before the
// control plane's earliest free: the kill timeout is cut to what fits (issue 43).
TEST_F(AllocManagerTest, OnceHeardTheDisconnectRuleCountsFromTheHeartbeatSentAndKillsInTime) {
  auto m = make_manager();
  m->apply({holder("short", domain::Duration{3000})});
  ASSERT_TRUE(settle([&] { return m->runner("short")->client_status() == ClientStatus::running; }));
  const auto sent = std::chrono::steady_clock::now();
  m->heard(Heard{sent, 2s});
  m->check_disconnect(sent + 3s - 1ms, 1h);  // the silence since the start no longer counts
  run_for(io, 50ms);
  EXPECT_FALSE(m->runner("short")->stop_requested());
  ASSERT_GT(m->runner("short")->kill_timeout(), 1s);
  m->check_disconnect(sent + 3s, 0s);
  EXPECT_TRUE(m->runner("short")->stop_requested());
  EXPECT_EQ(m->runner("short")->kill_timeout(), 1s) << "TTL 2s less the margin";
  ASSERT_TRUE(settle([&] { return m->runner("short")->finished(); }));
  EXPECT_EQ(m->runner("short")->client_status(), ClientStatus::complete);
  shutdown(*m);
}

TEST_F(AllocManagerTest, WatchFollowsTheControlPlaneAndSurvivesOutages) {
  auto m = make_manager();
  cp.down = true;
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("watch", m->watch());
  run_for(io, 100ms);
  cp.watch_answer.set_index(7);
  *cp.watch_answer.add_allocations() = domain::to_proto(holder("a1"));
  cp.down = false;
  ASSERT_TRUE(settle([&] { return m->runner("a1") != nullptr; }));
  EXPECT_EQ(m->last_index(), 7u);
  cp.down = true;
  run_for(io, 200ms);
  EXPECT_FALSE(m->runner("a1")->stop_requested()) << "an outage does not stop allocations by itself";
  group.cancel();
  run_async(io, [&]() -> asio::awaitable<void> { co_await group.join(); });
  shutdown(*m);
}

// After a long spell without a leader the watch's backoff has grown; the agent's link finds the
// new leader within about a second and says so (controlplane_back): the watch asks at once.
TEST_F(AllocManagerTest, AWatchRefusedMeanwhileIsSentAgainAsSoonAsTheControlPlaneIsBack) {
  async::WakeSignal back(io.get_executor());
  AllocManagerOptions o;
  o.node_id = "n1";
  o.state_dir = dir / "allocs";
  o.watch_wait = 50ms;
  o.watch_backoff = async::Backoff{30s, 60s, 2.0, 0.0};  // as if grown during the outage
  o.controlplane_back = &back;
  AllocManager m(io.get_executor(), cp, mounter, sink, o);
  cp.down = true;
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("watch", m.watch());
  run_for(io, 100ms);  // refused once: asleep for 30 s
  cp.watch_answer.set_index(7);
  *cp.watch_answer.add_allocations() = domain::to_proto(holder("a1"));
  cp.down = false;
  run_for(io, 100ms);
  EXPECT_EQ(m.runner("a1"), nullptr) << "still in its backoff until told";
  back.notify();
  EXPECT_TRUE(test::wait_until(
      [&] {
        run_for(io, 10ms);
        return m.runner("a1") != nullptr;
      },
      2s));
  group.cancel();
  run_async(io, [&]() -> asio::awaitable<void> { co_await group.join(); });
  shutdown(m);
}

TEST_F(AllocManagerTest, RestoreRestartsRunnersFromTheDataDir) {
  {
    auto m = make_manager();
    m->apply({holder("a1")});
    ASSERT_TRUE(settle([&] { return m->runner("a1")->client_status() == ClientStatus::running; }));
    shutdown(*m);
  }
  EXPECT_EQ(cp.claims.size(), 1u);
  mounter.restored["a1"] = {RestoredVolume{.volume_id = "vol-a1", .path = "/fake/a1/vol-a1", .mounted = true}};
  auto m = make_manager();
  m->restore();
  ASSERT_NE(m->runner("a1"), nullptr);
  ASSERT_TRUE(settle([&] { return m->runner("a1")->client_status() == ClientStatus::running; }));
  EXPECT_EQ(cp.claims.size(), 1u) << "still mounted: no new claim";
  shutdown(*m);
}

}  // namespace
}  // namespace mooring::nodeagent

namespace mooring::nodeagent {
namespace {

TEST_F(AllocManagerTest, AnAnswerNamingAllocationsUnchangedKeepsThemAndAppliesTheChangedOnes) {
  auto m = make_manager();
  v1::WatchAllocationsRequest first;
  m->fill_watch_request(first);
  EXPECT_EQ(first.node_id(), "n1");
  EXPECT_EQ(first.min_index(), 0u);
  EXPECT_EQ(first.incarnation(), 0u);
  EXPECT_TRUE(first.known().empty()) << "a first look holds nothing";
  auto a1 = holder("a1", domain::Duration{0}, 5);
  auto a2 = holder("a2", domain::Duration{0}, 6);
  ASSERT_TRUE(m->apply(first, answer(6, 9, {a1, a2})));
  ASSERT_TRUE(settle([&] {
    return m->runner("a1")->client_status() == ClientStatus::running &&
           m->runner("a2")->client_status() == ClientStatus::running;
  }));

  v1::WatchAllocationsRequest next;
  m->fill_watch_request(next);
  EXPECT_EQ(next.min_index(), 6u);
  EXPECT_EQ(next.incarnation(), 9u);
  EXPECT_EQ(known_of(next), (Known{{"a1", 5}, {"a2", 6}}));
  a2.desired_status = domain::DesiredStatus::stop;
  a2.modify_index = 8;
  ASSERT_TRUE(m->apply(next, answer(8, 9, {a2}, {{"a1", 5}})));
  ASSERT_TRUE(settle([&] { return m->runner("a2")->finished(); }));
  EXPECT_FALSE(m->runner("a1")->stop_requested()) << "named unchanged is still listed, not gone";
  EXPECT_EQ(m->runner("a1")->state().alloc.modify_index, 5u);
  EXPECT_EQ(m->last_index(), 8u);

  // Once an allocation is no longer listed at all, it is gone, as with answers in full.
  v1::WatchAllocationsRequest last;
  m->fill_watch_request(last);
  EXPECT_EQ(known_of(last), (Known{{"a1", 5}, {"a2", 8}}));
  ASSERT_TRUE(m->apply(last, answer(9, 9, {}, {{"a2", 8}})));
  ASSERT_TRUE(settle([&] { return m->runner("a1")->finished(); }));
  EXPECT_NE(m->runner("a1")->state().stop_reason.find("no longer assigned"), std::string::npos);
  shutdown(*m);
}

// After a restart nothing is held: the first request is a first look, the answer comes in full,
// and a restored allocation (whose SecretEnv never reaches the disk) gets it and starts its task.
TEST_F(AllocManagerTest, ARestartedAgentAsksForEverythingInFullAndARestoredTaskGetsItsSecretEnv) {
  const auto out = dir / "token";
  auto a1 = holder("a1", domain::Duration{0}, 5);
  a1.task = domain::Task{.command = "/bin/sh", .args = {"-c", "echo \"$TOKEN\" > " + out.string()}};
  a1.task->secret_env = {{"TOKEN", "watched-secret-3c1"}};
  {
    AllocStateStore store(dir / "allocs");
    AllocState before;
    before.alloc = a1;
    ASSERT_TRUE(store.save(before));
  }
  auto m = make_manager();
  m->restore();
  ASSERT_NE(m->runner("a1"), nullptr);
  EXPECT_TRUE(m->runner("a1")->state().secret_env_pending);
  v1::WatchAllocationsRequest req;
  m->fill_watch_request(req);
  EXPECT_EQ(req.min_index(), 0u);
  EXPECT_EQ(req.incarnation(), 0u);
  EXPECT_TRUE(req.known().empty());
  ASSERT_TRUE(m->apply(req, answer(5, 9, {a1})));
  ASSERT_TRUE(settle([&] { return m->runner("a1")->finished(); }));
  EXPECT_EQ(test::read_file(out), "watched-secret-3c1\n");
  shutdown(*m);
}

// However it came to be held, an allocation whose runner waits for its SecretEnv is not named in
// a request, and an answer naming it unchanged anyway is refused: nothing changes, and the next
// request is a first look.
TEST_F(AllocManagerTest, AnAllocationWaitingForItsSecretEnvIsNeverTakenAsUnchanged) {
  auto x = holder("x", domain::Duration{0}, 4);
  x.task = domain::Task{.command = "/bin/true"};
  x.task->secret_env = {{"TOKEN", "x"}};
  x.client_status = ClientStatus::complete;  // listed terminal: held, no runner
  auto m = make_manager();
  v1::WatchAllocationsRequest first;
  m->fill_watch_request(first);
  ASSERT_TRUE(m->apply(first, answer(4, 9, {x})));
  EXPECT_EQ(m->runner("x"), nullptr);
  {
    AllocStateStore store(dir / "allocs");
    AllocState state;
    state.alloc = x;
    ASSERT_TRUE(store.save(state));
  }
  m->restore();
  ASSERT_NE(m->runner("x"), nullptr);
  ASSERT_TRUE(m->runner("x")->state().secret_env_pending);
  v1::WatchAllocationsRequest req;
  m->fill_watch_request(req);
  EXPECT_EQ(req.incarnation(), 9u);
  EXPECT_TRUE(req.known().empty());
  EXPECT_FALSE(m->apply(req, answer(5, 9, {}, {{"x", 4}})));
  EXPECT_TRUE(m->runner("x")->state().secret_env_pending);
  EXPECT_FALSE(m->runner("x")->stop_requested()) << "a refused answer changes nothing";
  v1::WatchAllocationsRequest again;
  m->fill_watch_request(again);
  EXPECT_EQ(again.min_index(), 0u);
  EXPECT_EQ(again.incarnation(), 0u);
  shutdown(*m);
}

TEST_F(AllocManagerTest, TheWatchAsksWithWhatItHoldsAndAsAFirstLookAfterARefusedAnswer) {
  auto m = make_manager();
  const auto a1 = holder("a1", domain::Duration{0}, 5);
  cp.watch_answers.push_back(answer(7, 9, {a1}));
  cp.watch_answers.push_back(answer(8, 9, {}, {{"a9", 1}}));  // never held: cannot be completed
  cp.watch_answer = answer(9, 9, {a1});
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("watch", m->watch());
  ASSERT_TRUE(settle([&] { return cp.watches.size() >= 3; }));
  group.cancel();
  run_async(io, [&]() -> asio::awaitable<void> { co_await group.join(); });
  EXPECT_EQ(cp.watches[0].min_index(), 0u);
  EXPECT_TRUE(cp.watches[0].known().empty());
  EXPECT_EQ(cp.watches[1].min_index(), 7u);
  EXPECT_EQ(cp.watches[1].incarnation(), 9u);
  EXPECT_EQ(known_of(cp.watches[1]), (Known{{"a1", 5}}));
  EXPECT_EQ(cp.watches[2].min_index(), 0u);
  EXPECT_EQ(cp.watches[2].incarnation(), 0u);
  EXPECT_TRUE(cp.watches[2].known().empty());
  ASSERT_NE(m->runner("a1"), nullptr);
  EXPECT_FALSE(m->runner("a1")->stop_requested());
  shutdown(*m);
}

}  // namespace
}  // namespace mooring::nodeagent
