// The status reporter: batches reports, keeps them while the control plane is away, delivers
// them once it is back, and survives an agent restart through its file.
#include "services/nodeagent/allocrunner/status_reporter.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "shared/async/sleep.hpp"
#include "shared/async/task_group.hpp"
#include "shared/durable/durable_file.hpp"
#include "tests/nodeagent/support/fake_controlplane_calls.hpp"
#include "tests/nodeagent/support/run_async.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using domain::ClientStatus;

StatusReporterOptions options(const std::filesystem::path& file) {
  StatusReporterOptions o;
  o.node_id = "n1";
  o.state_file = file;
  o.backoff = async::Backoff{5ms, 20ms, 2.0, 0.0};
  o.batch_window = 5ms;
  return o;
}

TEST(StatusReporterTest, BatchesAndRetriesUntilDelivered) {
  test::TempDir dir{"status-reporter"};
  asio::io_context io;
  FakeControlPlaneCalls cp;
  cp.down = true;
  StatusReporter reporter(io.get_executor(), cp, options(dir / "updates.json"));
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("reporter", reporter.run());
  reporter.report("a1", ClientStatus::pending, {{domain::now(), "Received", "r"}});
  reporter.report("a1", ClientStatus::running, {{domain::now(), "Started", "s"}});
  reporter.report("a2", ClientStatus::failed, {{domain::now(), "SetupFailure", "f"}});
  run_for(io, 200ms);
  EXPECT_TRUE(cp.updates.empty());
  EXPECT_EQ(reporter.pending(), 2u);
  cp.down = false;
  ASSERT_TRUE(test::wait_until([&] { run_for(io, 10ms); return reporter.pending() == 0; }, 10s));
  EXPECT_EQ(cp.last_status("a1"), ::mooring::v1::CLIENT_STATUS_RUNNING);
  EXPECT_EQ(cp.last_status("a2"), ::mooring::v1::CLIENT_STATUS_FAILED);
  EXPECT_EQ(cp.event_types("a1"), (std::vector<std::string>{"Received", "Started"}));
  EXPECT_EQ(cp.updates.size(), 1u) << "one batch for everything pending";
  group.cancel();
  run_async(io, [&]() -> asio::awaitable<void> { co_await group.join(); });
}

// A report announces allocation states: nothing is sent before they are on disk (the agent
// wires before_send to AllocStateStore::durable).
TEST(StatusReporterTest, NothingIsSentBeforeTheReportedStatesAreDurable) {
  test::TempDir dir{"status-reporter"};
  asio::io_context io;
  FakeControlPlaneCalls cp;
  StatusReporter reporter(io.get_executor(), cp, options(dir / "updates.json"));
  bool durable = false;
  int fences = 0;
  reporter.set_before_send([&]() -> asio::awaitable<void> {
    ++fences;
    while (!durable) co_await async::sleep_for(5ms);
  });
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("reporter", reporter.run());
  reporter.report("a1", ClientStatus::complete, {{domain::now(), "Terminated", "done"}});
  run_for(io, 100ms);
  EXPECT_GE(fences, 1);
  EXPECT_TRUE(cp.updates.empty()) << "sent before the state it reports was durable";
  durable = true;
  ASSERT_TRUE(test::wait_until([&] { run_for(io, 10ms); return reporter.pending() == 0; }, 10s));
  EXPECT_EQ(cp.last_status("a1"), ::mooring::v1::CLIENT_STATUS_COMPLETE);
  group.cancel();
  run_async(io, [&]() -> asio::awaitable<void> { co_await group.join(); });
}

// While the control plane is unreachable the loop sleeps out its backoff: a report made then is
// on disk at once, not only with the next attempt (a crash would otherwise lose it).
TEST(StatusReporterTest, ReportsAreWrittenAtOnceWhileSendsFail) {
  test::TempDir dir{"status-reporter"};
  asio::io_context io;
  FakeControlPlaneCalls cp;
  cp.down = true;
  auto o = options(dir / "updates.json");
  o.backoff = async::Backoff{10s, 10s, 2.0, 0.0};  // the retry never comes during the test
  StatusReporter reporter(io.get_executor(), cp, o);
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("reporter", reporter.run());
  reporter.report("a1", ClientStatus::running, {{domain::now(), "Started", "s"}});
  ASSERT_TRUE(test::wait_until([&] { run_for(io, 10ms); return cp.refused_updates > 0; }, 10s));
  reporter.report("a1", ClientStatus::complete, {{domain::now(), "Killed", "k"}});
  {
    StatusReporter restarted(io.get_executor(), cp, options(dir / "updates.json"));  // what a crash leaves
    restarted.load();
    cp.down = false;
    run_async(io, [&]() -> asio::awaitable<void> { EXPECT_TRUE(co_await restarted.flush()); });
    EXPECT_EQ(cp.last_status("a1"), ::mooring::v1::CLIENT_STATUS_COMPLETE);
    EXPECT_EQ(cp.event_types("a1"), (std::vector<std::string>{"Started", "Killed"}));
  }
  group.cancel();
  run_async(io, [&]() -> asio::awaitable<void> { co_await group.join(); });
}

// A report that arrives while a batch is in flight goes out with the next batch, not after a
// failure backoff: the call went through.
TEST(StatusReporterTest, ReportsArrivingDuringASendGoOutWithTheNextBatch) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  auto o = options({});
  o.backoff = async::Backoff{10s, 10s, 2.0, 0.0};  // a backoff would make this test time out
  StatusReporter reporter(io.get_executor(), cp, o);
  cp.during_update = [&] { reporter.report("a1", ClientStatus::running, {{domain::now(), "Started", "s"}}); };
  async::TaskGroup group(io.get_executor(), "test");
  group.spawn("reporter", reporter.run());
  reporter.report("a1", ClientStatus::pending, {{domain::now(), "Received", "r"}});
  ASSERT_TRUE(test::wait_until([&] { run_for(io, 5ms); return cp.updates.size() == 2; }, 3s));
  EXPECT_EQ(cp.last_status("a1"), ::mooring::v1::CLIENT_STATUS_RUNNING);
  EXPECT_EQ(cp.event_types("a1"), (std::vector<std::string>{"Received", "Started"}));
  EXPECT_EQ(reporter.pending(), 0u);
  group.cancel();
  run_async(io, [&]() -> asio::awaitable<void> { co_await group.join(); });
}

TEST(StatusReporterTest, PendingReportsSurviveARestart) {
  test::TempDir dir{"status-reporter"};
  asio::io_context io;
  FakeControlPlaneCalls cp;
  {
    cp.down = true;
    StatusReporter reporter(io.get_executor(), cp, options(dir / "updates.json"));
    reporter.report("a1", ClientStatus::complete, {{domain::now(), "Terminated", "done"}});
    run_async(io, [&]() -> asio::awaitable<void> { EXPECT_FALSE(co_await reporter.flush()); });
  }
  cp.down = false;
  StatusReporter reporter(io.get_executor(), cp, options(dir / "updates.json"));
  reporter.load();
  EXPECT_EQ(reporter.pending(), 1u);
  run_async(io, [&]() -> asio::awaitable<void> { EXPECT_TRUE(co_await reporter.flush()); });
  EXPECT_EQ(cp.last_status("a1"), ::mooring::v1::CLIENT_STATUS_COMPLETE);
  EXPECT_EQ(cp.event_types("a1"), std::vector<std::string>{"Terminated"});
}

// In the agent the pending reports' file is written on the allocation states' writer thread:
// nothing is written on the executor, the write is on disk before the send (the fence runs the
// queue), and the destructor, whose writer may be gone, writes on its own thread.
TEST(StatusReporterTest, TheFileIsWrittenBehindAndOnDiskBeforeTheSend) {
  test::TempDir dir{"status-reporter"};
  const auto file = dir / "updates.json";
  auto on_disk = [&] {
    std::error_code ec;
    return durable::read_durable(file, ec).value_or("");
  };
  asio::io_context io;
  FakeControlPlaneCalls cp;
  std::vector<std::function<void()>> queued;
  std::string at_send;
  {
    StatusReporter reporter(io.get_executor(), cp, options(file));
    reporter.set_write_behind([&](std::function<void()> write) { queued.push_back(std::move(write)); });
    reporter.set_before_send([&]() -> asio::awaitable<void> {
      EXPECT_EQ(on_disk(), "") << "written on the executor";
      for (auto& write : queued) write();
      queued.clear();
      at_send = on_disk();
      co_return;
    });
    reporter.report("a1", ClientStatus::complete, {{domain::now(), "Terminated", "done"}});
    run_async(io, [&]() -> asio::awaitable<void> { EXPECT_TRUE(co_await reporter.flush()); });
    EXPECT_NE(at_send.find("a1"), std::string::npos) << at_send;
    EXPECT_EQ(cp.last_status("a1"), ::mooring::v1::CLIENT_STATUS_COMPLETE);
    ASSERT_EQ(queued.size(), 1u);  // the file without a1, once delivered: queued, not written
    EXPECT_NE(on_disk().find("a1"), std::string::npos);
    queued.front()();
    EXPECT_EQ(on_disk().find("a1"), std::string::npos);
    queued.clear();
    reporter.report("a2", ClientStatus::running, {});
  }
  EXPECT_TRUE(queued.empty());
  EXPECT_NE(on_disk().find("a2"), std::string::npos) << "the destructor writes what is pending itself";
}

TEST(StatusReporterTest, EventsAreBoundedWithADropNotice) {
  asio::io_context io;
  FakeControlPlaneCalls cp;
  auto o = options({});
  o.max_events_per_alloc = 5;
  StatusReporter reporter(io.get_executor(), cp, o);
  for (int i = 0; i < 20; ++i) reporter.report("a1", ClientStatus::running, {{domain::now(), "E", std::to_string(i)}});
  run_async(io, [&]() -> asio::awaitable<void> { EXPECT_TRUE(co_await reporter.flush()); });
  const auto types = cp.event_types("a1");
  ASSERT_LE(types.size(), 5u);
  EXPECT_EQ(types.front(), "EventsDropped");
}

}  // namespace
}  // namespace mooring::nodeagent
