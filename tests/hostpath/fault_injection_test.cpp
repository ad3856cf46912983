// mooring-hostpath's fault injection, driven through the control file while the plugin runs:
// fail N times, fail for T seconds, latency, hang until the deadline, crash; and the call log.
#include <gtest/gtest.h>

#include <thread>

#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using namespace std::chrono_literals;
using AM = csi::v1::VolumeCapability::AccessMode;
using grpc::StatusCode;

class HostpathFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = std::make_unique<HostpathPlugin>(dir_);
    ASSERT_NO_FATAL_FAILURE(plugin_->start());
  }
  void TearDown() override {
    plugin_.reset();
    dir_.unmount_all();
  }

  grpc::Status node_info(std::chrono::milliseconds timeout = 10s) {
    csi::v1::NodeGetInfoResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx, timeout);
    return plugin_->node().NodeGetInfo(&ctx, {}, &resp);
  }
  grpc::Status probe(std::chrono::milliseconds timeout = 10s) {
    csi::v1::ProbeResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx, timeout);
    return plugin_->identity().Probe(&ctx, {}, &resp);
  }

  test::TempDir dir_{"hp-fault"};
  std::unique_ptr<HostpathPlugin> plugin_;
};

TEST_F(HostpathFaults, FailsNTimesWithTheGivenCodeThenSucceeds) {
  plugin_->set_faults(R"({"rules":[{"rpc":"NodeGetInfo","code":14,"count":3}]})");
  for (int i = 0; i < 3; ++i) {
    const auto st = node_info();
    EXPECT_EQ(st.error_code(), StatusCode::UNAVAILABLE) << "call " << i;
    EXPECT_NE(st.error_message().find("injected"), std::string::npos);
  }
  EXPECT_TRUE(node_info().ok());
  EXPECT_TRUE(probe().ok());  // other RPCs were never affected

  const auto calls = plugin_->calls();
  int failed = 0;
  for (const auto& c : calls) {
    if (c.at("rpc") == "NodeGetInfo" && c.at("fault") == "fail") {
      EXPECT_EQ(c.at("code"), 14);
      EXPECT_EQ(c.at("code_name"), "UNAVAILABLE");
      ++failed;
    }
  }
  EXPECT_EQ(failed, 3);
}

TEST_F(HostpathFaults, FailsEveryRpcForTSecondsThenRecovers) {
  const auto loaded = std::chrono::steady_clock::now();
  plugin_->set_faults(R"([{"rpc":"*","code":14,"for_seconds":3}])");
  EXPECT_EQ(probe().error_code(), StatusCode::UNAVAILABLE);
  EXPECT_EQ(node_info().error_code(), StatusCode::UNAVAILABLE);
  EXPECT_TRUE(test::wait_until([&] { return probe().ok(); }, 30s, 100ms));
  EXPECT_GE(std::chrono::steady_clock::now() - loaded, 2900ms);
  EXPECT_TRUE(node_info().ok());
}

TEST_F(HostpathFaults, AddsLatencyAndStillDoesTheWorkAfterTheCallerGaveUp) {
  plugin_->set_faults(R"({"rules":[{"rpc":"CreateVolume","delay_ms":600}]})");
  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(plugin_->create_volume("slow", 1 << 20, nullptr).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - started, 550ms);

  // The caller times out first; the volume is created anyway (an "uncertain" outcome).
  csi::v1::CreateVolumeRequest req;
  req.set_name("uncertain");
  *req.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  csi::v1::CreateVolumeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx, 100ms);
  EXPECT_EQ(plugin_->controller().CreateVolume(&ctx, req, &resp).error_code(), StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(test::wait_until(
      [&] {
        for (const auto& c : plugin_->calls()) {
          if (c.at("rpc") == "CreateVolume" && c.at("volume_id") == "uncertain") return c.at("code") == 0;
        }
        return false;
      },
      30s));
  plugin_->set_faults("[]");
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("uncertain", 0, &vol).ok());  // the retry finds it
  EXPECT_FALSE(vol.volume_id().empty());
}

TEST_F(HostpathFaults, HangsUntilTheDeadlineWhileOtherCallsAreServed) {
  plugin_->set_faults(R"({"rules":[{"rpc":"Probe","hang":true}]})");
  std::atomic<bool> done{false};
  grpc::Status hung;
  std::chrono::steady_clock::duration took{};
  std::thread t([&] {
    const auto started = std::chrono::steady_clock::now();
    hung = probe(1500ms);
    took = std::chrono::steady_clock::now() - started;
    done = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(done);
  EXPECT_TRUE(node_info().ok());  // a hung call does not block the plugin
  t.join();
  EXPECT_EQ(hung.error_code(), StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GE(took, 1400ms);
  EXPECT_LT(took, 20s);
  // The plugin notices the end of the call and logs it.
  EXPECT_TRUE(test::wait_until(
      [&] {
        for (const auto& c : plugin_->calls()) {
          if (c.at("rpc") == "Probe" && c.at("fault") == "hang") return true;
        }
        return false;
      },
      30s));
}

TEST_F(HostpathFaults, ExitCrashesThePluginAndDoesNotReArmAfterRestart) {
  plugin_->set_faults(R"({"rules":[{"rpc":"NodeGetInfo","exit":true,"count":1}]})");
  EXPECT_EQ(node_info().error_code(), StatusCode::UNAVAILABLE);
  const auto st = plugin_->process().wait_for_exit(30s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->exited);
  EXPECT_EQ(st->code, 137);
  ASSERT_FALSE(plugin_->calls().empty());
  EXPECT_EQ(plugin_->calls().back().at("fault"), "exit");

  // Restarted (as a supervisor would), the used-up rule stays used up.
  ASSERT_NO_FATAL_FAILURE(plugin_->start());
  EXPECT_TRUE(node_info().ok());
  EXPECT_TRUE(plugin_->process().running());
}

TEST_F(HostpathFaults, RulesChangeWithoutRestartAndCanTargetOneVolume) {
  plugin_->set_faults(R"({"rules":[{"rpc":"DeleteVolume","volume_id":"vol-aaaaaaaaaaaaaaaa","code":9}]})");
  EXPECT_EQ(plugin_->delete_volume("vol-aaaaaaaaaaaaaaaa").error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(plugin_->delete_volume("vol-bbbbbbbbbbbbbbbb").ok());
  plugin_->set_faults(R"({"rules":[]})");
  EXPECT_TRUE(plugin_->delete_volume("vol-aaaaaaaaaaaaaaaa").ok());
  plugin_->set_faults(R"({"rules":[{"rpc":"DeleteVolume","code":10,"message":"busy, try later"}]})");
  const auto st = plugin_->delete_volume("vol-aaaaaaaaaaaaaaaa");
  EXPECT_EQ(st.error_code(), StatusCode::ABORTED);
  EXPECT_EQ(st.error_message(), "busy, try later");
  // A broken file is rejected and the previous rules stay in force.
  plugin_->set_faults(R"({"rules":[{"rpc":"DeleteVolume","cod":10}]})");
  EXPECT_EQ(plugin_->delete_volume("vol-aaaaaaaaaaaaaaaa").error_code(), StatusCode::ABORTED);
  std::filesystem::remove(plugin_->fault_file());
  EXPECT_TRUE(plugin_->delete_volume("vol-aaaaaaaaaaaaaaaa").ok());
}

// Stats of a published volume: real usage, a normal condition; an "abnormal" rule makes the
// condition abnormal with its message (usage still real) until it is removed.
TEST_F(HostpathFaults, AbnormalRuleTurnsTheVolumeConditionAbnormalUntilRemoved) {
  MOORING_REQUIRE_ROOT();
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("stats", 1 << 20, &vol).ok());
  const auto staging = dir_ / "staging";
  const auto target = dir_ / "target";
  ASSERT_TRUE(plugin_->stage(vol.volume_id(), staging, AM::SINGLE_NODE_WRITER).ok());
  ASSERT_TRUE(plugin_->publish(vol.volume_id(), staging, target, AM::SINGLE_NODE_WRITER).ok());
  auto stats = [&] {
    csi::v1::NodeGetVolumeStatsRequest r;
    r.set_volume_id(vol.volume_id());
    r.set_volume_path(target.string());
    csi::v1::NodeGetVolumeStatsResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    EXPECT_TRUE(plugin_->node().NodeGetVolumeStats(&ctx, r, &o).ok());
    return o;
  };
  auto normal = stats();
  ASSERT_EQ(normal.usage_size(), 2);
  EXPECT_EQ(normal.usage(0).unit(), csi::v1::VolumeUsage::BYTES);
  EXPECT_GT(normal.usage(0).total(), 0);
  EXPECT_GT(normal.usage(1).total(), 0);  // inodes, from statvfs
  EXPECT_FALSE(normal.volume_condition().abnormal());

  plugin_->set_faults(R"({"rules":[{"rpc":"NodeGetVolumeStats","abnormal":"disk on fire"}]})");
  auto abnormal = stats();
  EXPECT_TRUE(abnormal.volume_condition().abnormal());
  EXPECT_EQ(abnormal.volume_condition().message(), "disk on fire");
  EXPECT_EQ(abnormal.usage_size(), 2);

  plugin_->set_faults(R"({"rules":[]})");
  EXPECT_FALSE(stats().volume_condition().abnormal());
  ASSERT_TRUE(plugin_->unpublish(vol.volume_id(), target).ok());
  ASSERT_TRUE(plugin_->unstage(vol.volume_id(), staging).ok());
}

TEST_F(HostpathFaults, CallLogRecordsEveryCallInOrderWithVolumeAndNode) {
  MOORING_REQUIRE_ROOT();
  auto& p = *plugin_;
  csi::v1::Volume vol;
  ASSERT_TRUE(p.create_volume("logged", 1 << 20, &vol).ok());
  const auto staging = dir_.make_dir("staging");
  const auto target = dir_ / "target";
  ASSERT_TRUE(p.controller_publish(vol.volume_id(), "node-a", AM::SINGLE_NODE_WRITER).ok());
  ASSERT_TRUE(p.stage(vol.volume_id(), staging, AM::SINGLE_NODE_WRITER).ok());
  ASSERT_TRUE(p.publish(vol.volume_id(), staging, target, AM::SINGLE_NODE_WRITER).ok());
  ASSERT_TRUE(p.unpublish(vol.volume_id(), target).ok());
  ASSERT_TRUE(p.unstage(vol.volume_id(), staging).ok());
  ASSERT_TRUE(p.controller_unpublish(vol.volume_id(), "node-a").ok());
  EXPECT_EQ(p.call_names(vol.volume_id()),
            (std::vector<std::string>{"ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume",
                                      "NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume"}));
  for (const auto& c : p.calls()) {
    if (c.at("volume_id") != vol.volume_id()) continue;
    EXPECT_EQ(c.at("node_id"), "node-a") << c.dump();
    EXPECT_EQ(c.at("code"), 0) << c.dump();
    EXPECT_TRUE(c.contains("time"));
    EXPECT_TRUE(c.contains("duration_ms"));
  }
  for (const auto& c : p.calls()) {
    if (c.at("rpc") == "NodePublishVolume") {
      EXPECT_EQ(c.at("path"), target.string());
    }
  }
}

}  // namespace
}  // namespace mooring::hostpath
