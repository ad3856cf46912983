// The allocation set: runners start for new allocations, stop on desired=stop, are removed once
// the control plane lists them terminal; the client-side disconnect rule stops allocations with
// StopAfterClientDisconnect; restore() picks up allocations from the data dir.
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
using namespace std::chrono_literals;
using domain::ClientStatus;

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
  static domain::Allocation holder(const std::string& id, domain::Duration stop_after = domain::Duration{0}) {
    domain::Allocation a;
    a.id = id;
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
    return test::wait_until([&] { run_for(io, 10ms); return pred(); }, 10s);
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
  m->check_disconnect(1s);
  run_for(io, 50ms);
  EXPECT_FALSE(m->runner("short")->stop_requested());
  m->check_disconnect(3s);
  ASSERT_TRUE(settle([&] { return m->runner("short")->finished(); }));
  EXPECT_EQ(m->runner("short")->client_status(), ClientStatus::complete);
  EXPECT_NE(m->runner("short")->state().stop_reason.find("no contact with the control plane"), std::string::npos);
  EXPECT_FALSE(m->runner("never")->stop_requested());
  ASSERT_EQ(mounter.releases.size(), 1u);
  EXPECT_EQ(mounter.releases[0].first, "short");
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
  EXPECT_TRUE(test::wait_until([&] { run_for(io, 10ms); return m.runner("a1") != nullptr; }, 2s));
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
