// The hand-over between two copies of mooring-hostpath for one node (a rolling upgrade starts the
// new copy beside the old one): the new copy answers Identity and NodeGetInfo at once, holds
// every call that touches state until the old copy has drained its calls and exited, and never
// refuses one; a held call still ends at its deadline, having done nothing. First the Takeover
// class against a lock this test holds, then the real binary, two copies on one data dir.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "plugins/hostpath/takeover.hpp"
#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using namespace std::chrono_literals;
using AM = csi::v1::VolumeCapability::AccessMode;
using SysClock = std::chrono::system_clock;
constexpr std::int64_t kMi = 1 << 20;

TEST(TakeoverRules, OnlyIdentityNodeGetInfoAndCapabilitiesRunWithoutTheLock) {
  for (const auto* rpc : {"GetPluginInfo", "GetPluginCapabilities", "Probe", "NodeGetInfo", "NodeGetCapabilities",
                          "ControllerGetCapabilities", "GroupControllerGetCapabilities"})
    EXPECT_FALSE(touches_state(rpc)) << rpc;
  for (const auto* rpc : {"CreateVolume", "DeleteVolume", "ControllerPublishVolume", "ControllerUnpublishVolume",
                          "ListVolumes", "GetCapacity", "CreateSnapshot", "ControllerExpandVolume", "NodeStageVolume",
                          "NodeUnstageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeGetVolumeStats",
                          "NodeExpandVolume", "ValidateVolumeCapabilities", "CreateVolumeGroupSnapshot"})
    EXPECT_TRUE(touches_state(rpc)) << rpc;
}

class TakeoverLock : public ::testing::Test {
 protected:
  std::vector<Takeover::Lock> locks() const {
    return {{dir_ / "locks" / "node-a.lock", "a hostpath node service for node \"a\""},
            {dir_ / "locks" / "controller-a.lock", "a hostpath controller service for node \"a\""}};
  }
  // What the other copy holds: the node lock (the first one a copy takes).
  durable::InstanceLock hold_node_lock() {
    auto lock = durable::InstanceLock::acquire(dir_ / "locks" / "node-a.lock", "the old copy");
    if (!lock) throw std::runtime_error(lock.error());
    return std::move(*lock);
  }
  std::function<std::string()> count_opens() {
    return [this] {
      ++opens_;
      return std::string{};
    };
  }
  test::TempDir dir_{"hp-takeover"};
  std::atomic<int> opens_{0};
};

TEST_F(TakeoverLock, FreeLocksMakeItActiveAtOnceAndCallsRun) {
  Takeover t(locks(), count_opens());
  EXPECT_EQ(t.start(), Takeover::Start::active);
  EXPECT_EQ(opens_, 1);
  EXPECT_TRUE(t.hold("NodePublishVolume", SysClock::now() + 1s, {}).ok());
  // This copy now holds both locks: a third copy would wait for it.
  bool busy = false;
  EXPECT_FALSE(durable::InstanceLock::acquire(dir_ / "locks" / "controller-a.lock", "x", &busy));
  EXPECT_TRUE(busy);
}

TEST_F(TakeoverLock, AHeldCallWaitsUntilTheOtherCopyReleasesTheLockThenRunsAfterTheStateIsOpen) {
  auto old = std::make_optional(hold_node_lock());
  Takeover t(locks(), count_opens(), 2ms);
  ASSERT_EQ(t.start(), Takeover::Start::standby);
  EXPECT_NE(t.holder().find("is already running (pid " + std::to_string(::getpid())), std::string::npos)
      << t.holder();
  std::promise<std::string> done;
  t.wait_in_background([&](const std::string& err) { done.set_value(err); });
  auto held = std::async(std::launch::async, [&] {
    const auto st = t.hold("NodePublishVolume", SysClock::now() + 10s, {});
    return std::make_pair(st.ok(), opens_.load());
  });
  EXPECT_EQ(held.wait_for(200ms), std::future_status::timeout) << "held while the other copy has the lock";
  EXPECT_EQ(opens_, 0) << "the state is not touched before the lock is ours";
  const auto released = std::chrono::steady_clock::now();
  old.reset();
  ASSERT_EQ(held.wait_for(5s), std::future_status::ready);
  const auto [ok, opens_seen] = held.get();
  EXPECT_TRUE(ok);
  EXPECT_EQ(opens_seen, 1) << "the state was open before the held call went on";
  EXPECT_LT(std::chrono::steady_clock::now() - released, 1s);
  EXPECT_EQ(done.get_future().get(), "");
  EXPECT_TRUE(t.active());
}

TEST_F(TakeoverLock, AHeldCallEndsAtItsDeadlineNamingTheHolderAndACancelledOneAtOnce) {
  auto old = hold_node_lock();
  Takeover t(locks(), count_opens(), 2ms);
  ASSERT_EQ(t.start(), Takeover::Start::standby);
  t.wait_in_background([](const std::string&) {});
  const auto began = std::chrono::steady_clock::now();
  auto st = t.hold("NodeUnpublishVolume", SysClock::now() + 150ms, {});
  EXPECT_GE(std::chrono::steady_clock::now() - began, 140ms);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(st.error_message().find("did nothing"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("pid " + std::to_string(::getpid())), std::string::npos) << st.error_message();
  st = t.hold("NodeUnpublishVolume", SysClock::now() + 10s, [] { return true; });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(opens_, 0);
}

TEST_F(TakeoverLock, StoppingBeforeTheTakeoverAnswersHeldCallsUnavailableAndNeverOpensTheState) {
  auto old = hold_node_lock();
  Takeover t(locks(), count_opens(), 2ms);
  ASSERT_EQ(t.start(), Takeover::Start::standby);
  t.wait_in_background([](const std::string&) {});
  auto held = std::async(std::launch::async, [&] { return t.hold("CreateVolume", SysClock::now() + 10s, {}); });
  std::this_thread::sleep_for(50ms);
  t.stop();
  ASSERT_EQ(held.wait_for(2s), std::future_status::ready);
  const auto st = held.get();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("stopping before it took over"), std::string::npos) << st.error_message();
  EXPECT_EQ(opens_, 0);
}

TEST_F(TakeoverLock, AStateThatCannotBeOpenedFailsTheHeldCallsWithTheReason) {
  auto old = std::make_optional(hold_node_lock());
  Takeover t(locks(), [] { return std::string("node state unusable: corrupt"); }, 2ms);
  ASSERT_EQ(t.start(), Takeover::Start::standby);
  std::promise<std::string> done;
  t.wait_in_background([&](const std::string& err) { done.set_value(err); });
  old.reset();
  EXPECT_EQ(done.get_future().get(), "node state unusable: corrupt");
  const auto st = t.hold("NodeStageVolume", SysClock::now() + 1s, {});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("corrupt"), std::string::npos) << st.error_message();
}

TEST_F(TakeoverLock, DrainLetsRunningCallsFinishRefusesNewOnesThenReleasesTheLocksAtOnce) {
  Takeover t(locks(), count_opens());
  ASSERT_EQ(t.start(), Takeover::Start::active);
  ASSERT_TRUE(t.hold("NodePublishVolume", SysClock::now() + 10s, {}).ok());  // running, not done yet
  auto drained = std::async(std::launch::async, [&] { return t.drain(10s); });
  EXPECT_EQ(drained.wait_for(200ms), std::future_status::timeout) << "waits for the running call";
  const auto refused = t.hold("NodeUnpublishVolume", SysClock::now() + 10s, {});
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.error_message().find("hands the node over"), std::string::npos) << refused.error_message();
  bool busy = false;
  EXPECT_FALSE(durable::InstanceLock::acquire(dir_ / "locks" / "node-a.lock", "next", &busy)) << "still ours";
  t.done();
  ASSERT_EQ(drained.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(drained.get(), 0u);
  // Released before this object (the process) goes: the next copy takes over now.
  EXPECT_TRUE(durable::InstanceLock::acquire(dir_ / "locks" / "node-a.lock", "next"));
  EXPECT_TRUE(durable::InstanceLock::acquire(dir_ / "locks" / "controller-a.lock", "next"));
}

// The real binary: an old copy serving, a new one started beside it on the same data dir.
class HostpathTakeover : public ::testing::Test {
 protected:
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    old_ = std::make_unique<HostpathPlugin>(dir_);
    ASSERT_NO_FATAL_FAILURE(old_->start());
    ASSERT_TRUE(old_->create_volume("v", 2 * kMi, &vol_).ok());
    ASSERT_TRUE(old_->stage(vol_.volume_id(), staging_, AM::SINGLE_NODE_WRITER).ok());
  }
  void TearDown() override {
    new_.reset();
    old_.reset();
    dir_.unmount_all();
  }
  void start_new() {
    new_ = std::make_unique<HostpathPlugin>(
        dir_, PluginSetup{.extra_args = {"--vendor-version", "9.9.9-new"}, .instance = "new"});
    ASSERT_NO_FATAL_FAILURE(new_->start());
  }
  // NodePublishVolume to `p` with its own deadline, in a thread: the test goes on while it is held.
  std::future<grpc::Status> publish_async(HostpathPlugin& p, std::chrono::milliseconds deadline) {
    return std::async(std::launch::async, [&p, deadline, this] {
      csi::v1::NodePublishVolumeRequest req;
      req.set_volume_id(vol_.volume_id());
      req.set_staging_target_path(staging_.string());
      req.set_target_path(target_.string());
      *req.mutable_volume_capability() = mount_capability(AM::SINGLE_NODE_WRITER);
      csi::v1::NodePublishVolumeResponse resp;
      grpc::ClientContext ctx;
      set_deadline(ctx, deadline);
      return p.node().NodePublishVolume(&ctx, req, &resp);
    });
  }
  std::vector<nlohmann::json> calls_of(const HostpathPlugin& p, const std::string& rpc) const {
    std::vector<nlohmann::json> out;
    for (auto& c : p.calls())
      if (c["rpc"] == rpc) out.push_back(c);
    return out;
  }

  test::TempDir dir_{"hp-takeover-bin"};
  std::unique_ptr<HostpathPlugin> old_;
  std::unique_ptr<HostpathPlugin> new_;
  csi::v1::Volume vol_;
  std::filesystem::path staging_ = dir_.make_dir("staging");
  std::filesystem::path target_ = dir_ / "target";
};

TEST_F(HostpathTakeover, TheNewCopyIsHealthyAtOnceHoldsStateCallsAndServesThemWhenTheOldCopyExits) {
  ASSERT_NO_FATAL_FAILURE(start_new());
  {
    csi::v1::ProbeResponse probe;
    grpc::ClientContext ctx;
    set_deadline(ctx, 2s);
    const auto st = new_->identity().Probe(&ctx, {}, &probe);
    EXPECT_TRUE(st.ok() && probe.ready().value()) << st.error_message();
  }
  {
    csi::v1::GetPluginInfoResponse info;
    grpc::ClientContext ctx;
    set_deadline(ctx, 2s);
    ASSERT_TRUE(new_->identity().GetPluginInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.vendor_version(), "9.9.9-new");
  }
  {
    csi::v1::NodeGetInfoResponse info;
    grpc::ClientContext ctx;
    set_deadline(ctx, 2s);
    ASSERT_TRUE(new_->node().NodeGetInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.node_id(), "node-a");
  }

  auto held = publish_async(*new_, 20s);
  EXPECT_EQ(held.wait_for(500ms), std::future_status::timeout) << "answered while the old copy holds the lock";
  EXPECT_TRUE(calls_of(*new_, "NodePublishVolume").empty());
  EXPECT_FALSE(test::is_mounted(target_));

  ASSERT_TRUE(old_->terminate().has_value());
  ASSERT_EQ(held.wait_for(10s), std::future_status::ready);
  const auto st = held.get();
  EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
  EXPECT_TRUE(test::is_mounted(target_));
  const auto logged = calls_of(*new_, "NodePublishVolume");
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_GE(logged[0].value("held_ms", 0), 400) << logged[0].dump();
  EXPECT_EQ(logged[0]["pid"], new_->process().pid());
  // The new copy read what the old one recorded: it unpublishes and unstages the old one's mounts.
  EXPECT_TRUE(new_->unpublish(vol_.volume_id(), target_).ok());
  EXPECT_TRUE(new_->unstage(vol_.volume_id(), staging_).ok());
  EXPECT_FALSE(test::is_mounted(target_));
  EXPECT_FALSE(test::is_mounted(staging_));
}

TEST_F(HostpathTakeover, TheOldCopyFinishesItsCallInFlightBeforeItReleasesTheLock) {
  // A slow NodePublishVolume on the old copy, in flight when it is told to stop.
  old_->set_faults(R"({"rules":[{"rpc":"NodePublishVolume","delay_ms":3000}]})");
  ASSERT_NO_FATAL_FAILURE(start_new());
  auto in_flight = publish_async(*old_, 20s);
  std::this_thread::sleep_for(300ms);
  auto held = std::async(std::launch::async, [&] {
    csi::v1::NodeGetVolumeStatsRequest req;
    req.set_volume_id(vol_.volume_id());
    req.set_volume_path(target_.string());
    csi::v1::NodeGetVolumeStatsResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx, 20s);
    return new_->node().NodeGetVolumeStats(&ctx, req, &resp);
  });
  ASSERT_TRUE(old_->terminate().has_value());
  ASSERT_EQ(in_flight.wait_for(5s), std::future_status::ready);
  const auto st = in_flight.get();
  EXPECT_TRUE(st.ok()) << "drained, not cancelled: " << st.error_code() << " " << st.error_message();
  EXPECT_TRUE(test::is_mounted(target_));
  // The new copy's held call ran after the old one's publish: it sees the published volume.
  ASSERT_EQ(held.wait_for(10s), std::future_status::ready);
  const auto stats = held.get();
  EXPECT_TRUE(stats.ok()) << stats.error_code() << " " << stats.error_message();
  const auto old_publish = calls_of(*old_, "NodePublishVolume");
  const auto new_stats = calls_of(*new_, "NodeGetVolumeStats");
  ASSERT_EQ(old_publish.size(), 1u);
  ASSERT_EQ(new_stats.size(), 1u);
  EXPECT_LE(old_publish[0]["unix_ms"].get<std::int64_t>(), new_stats[0]["unix_ms"].get<std::int64_t>());
}

TEST_F(HostpathTakeover, AHeldCallEndsAtItsDeadlineHavingDoneNothingAndTheOldCopyIsUnharmed) {
  ASSERT_NO_FATAL_FAILURE(start_new());
  auto held = publish_async(*new_, 300ms);
  ASSERT_EQ(held.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(held.get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_FALSE(test::is_mounted(target_));
  // The old copy still serves the node's state.
  EXPECT_TRUE(old_->publish(vol_.volume_id(), staging_, target_, AM::SINGLE_NODE_WRITER).ok());
  EXPECT_TRUE(test::is_mounted(target_));
  EXPECT_TRUE(old_->unpublish(vol_.volume_id(), target_).ok());
}

TEST_F(HostpathTakeover, ANewCopyStoppedBeforeItTookOverExitsAtOnceAnsweringItsHeldCallsUnavailable) {
  ASSERT_NO_FATAL_FAILURE(start_new());
  auto held = publish_async(*new_, 20s);
  std::this_thread::sleep_for(200ms);
  const auto exit = new_->terminate();
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->exited && exit->code == 0) << exit->describe();
  ASSERT_EQ(held.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(held.get().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(test::is_mounted(target_));
  EXPECT_TRUE(old_->publish(vol_.volume_id(), staging_, target_, AM::SINGLE_NODE_WRITER).ok());
  EXPECT_TRUE(old_->unpublish(vol_.volume_id(), target_).ok());
}

}  // namespace
}  // namespace mooring::hostpath
