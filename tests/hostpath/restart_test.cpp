// mooring-hostpath survives crashes: state written before an acknowledgement is there after
// kill -9 and restart, mounts are recognised, and the socket is handled on both kinds of exit.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
constexpr std::int64_t kMi = 1 << 20;

class HostpathRestart : public ::testing::Test {
 protected:
  void TearDown() override {
    plugin_.reset();
    dir_.unmount_all();
  }
  test::TempDir dir_{"hp-restart"};
  std::unique_ptr<HostpathPlugin> plugin_;
};

TEST_F(HostpathRestart, StateAndMountsSurviveKill9AndRestart) {
  MOORING_REQUIRE_ROOT();
  plugin_ = std::make_unique<HostpathPlugin>(dir_);
  ASSERT_NO_FATAL_FAILURE(plugin_->start());
  auto& p = *plugin_;
  csi::v1::Volume vol;
  ASSERT_TRUE(p.create_volume("keep", 3 * kMi, &vol).ok());
  ASSERT_TRUE(p.controller_publish(vol.volume_id(), "node-a", AM::SINGLE_NODE_WRITER).ok());
  const auto staging = dir_.make_dir("staging");
  const auto target = dir_ / "target";
  ASSERT_TRUE(p.stage(vol.volume_id(), staging, AM::SINGLE_NODE_WRITER).ok());
  ASSERT_TRUE(p.publish(vol.volume_id(), staging, target, AM::SINGLE_NODE_WRITER).ok());
  csi::v1::CreateSnapshotRequest sreq;
  sreq.set_name("snap");
  sreq.set_source_volume_id(vol.volume_id());
  csi::v1::CreateSnapshotResponse sresp;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.controller().CreateSnapshot(&ctx, sreq, &sresp).ok());
  }

  ASSERT_NO_FATAL_FAILURE(p.restart());
  EXPECT_TRUE(test::is_mounted(target));  // a plugin crash does not take mounts away

  csi::v1::ListVolumesResponse list;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.controller().ListVolumes(&ctx, {}, &list).ok());
  }
  ASSERT_EQ(list.entries_size(), 1);
  EXPECT_EQ(list.entries(0).volume().volume_id(), vol.volume_id());
  EXPECT_EQ(list.entries(0).volume().capacity_bytes(), 3 * kMi);
  ASSERT_EQ(list.entries(0).status().published_node_ids_size(), 1);
  EXPECT_EQ(list.entries(0).status().published_node_ids(0), "node-a");
  csi::v1::ListSnapshotsResponse snaps;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(p.controller().ListSnapshots(&ctx, {}, &snaps).ok());
  }
  ASSERT_EQ(snaps.entries_size(), 1);
  EXPECT_EQ(snaps.entries(0).snapshot().snapshot_id(), sresp.snapshot().snapshot_id());

  // The same name is still the same volume; the node recognises its own mounts.
  csi::v1::Volume again;
  ASSERT_TRUE(p.create_volume("keep", 3 * kMi, &again).ok());
  EXPECT_EQ(again.volume_id(), vol.volume_id());
  ASSERT_TRUE(p.stage(vol.volume_id(), staging, AM::SINGLE_NODE_WRITER).ok());
  ASSERT_TRUE(p.publish(vol.volume_id(), staging, target, AM::SINGLE_NODE_WRITER).ok());
  EXPECT_EQ(test::mounts_under(target).size(), 1u);
  // The second-node refusal still knows who holds the volume.
  EXPECT_EQ(p.controller_publish(vol.volume_id(), "node-b", AM::SINGLE_NODE_WRITER).error_code(),
            grpc::StatusCode::NOT_FOUND);  // node-b is not known at all

  ASSERT_TRUE(p.unpublish(vol.volume_id(), target).ok());
  ASSERT_TRUE(p.unstage(vol.volume_id(), staging).ok());
  ASSERT_TRUE(p.controller_unpublish(vol.volume_id(), "node-a").ok());
  EXPECT_TRUE(test::mounts_under(dir_.path()).empty());
}

TEST_F(HostpathRestart, SigtermRemovesTheSocketAndExitsCleanly) {
  plugin_ = std::make_unique<HostpathPlugin>(dir_);
  ASSERT_NO_FATAL_FAILURE(plugin_->start());
  const auto st = plugin_->terminate();
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->exited) << st->describe();
  EXPECT_EQ(st->code, 0) << plugin_->process().output();
  EXPECT_FALSE(std::filesystem::exists(plugin_->socket()));
}

TEST_F(HostpathRestart, AStaleSocketFromACrashIsReplaced) {
  plugin_ = std::make_unique<HostpathPlugin>(dir_);
  ASSERT_NO_FATAL_FAILURE(plugin_->start());
  plugin_->kill9();
  ASSERT_TRUE(std::filesystem::exists(plugin_->socket()));  // left behind by the crash
  ASSERT_NO_FATAL_FAILURE(plugin_->start());
  csi::v1::ProbeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  const auto st = plugin_->identity().Probe(&ctx, {}, &resp);
  EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
}

// One node service per node and data dir touches the state: a second one (the new copy of a
// rolling upgrade, or an orphan of a killed agent beside its replacement) does not exit but waits,
// naming the first, and the first goes on unharmed (takeover_test.cpp pins the hand-over).
TEST_F(HostpathRestart, ASecondInstanceForTheSameNodeWaitsForTheFirstNamingIt) {
  plugin_ = std::make_unique<HostpathPlugin>(dir_);
  ASSERT_NO_FATAL_FAILURE(plugin_->start());
  test::ChildProcess second({test::binary_path("mooring-hostpath"),
                             {"--endpoint", "unix://" + (dir_ / "second.sock").string(), "--data-dir",
                              plugin_->data_dir().string(), "--node-id", plugin_->node_id()},
                             {},
                             false,
                             dir_ / "second.out"});
  const auto waiting = "is already running (pid " + std::to_string(plugin_->process().pid()) + ";";
  for (int i = 0; i < 300 && second.output().find(waiting) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(second.output().find(waiting), std::string::npos) << second.output();
  EXPECT_TRUE(second.running()) << second.output();
  EXPECT_TRUE(std::filesystem::exists(dir_ / "second.sock")) << "it serves Identity meanwhile";
  csi::v1::ProbeResponse resp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  EXPECT_TRUE(plugin_->identity().Probe(&ctx, {}, &resp).ok()) << "the first one is unharmed";
  second.terminate();
  EXPECT_TRUE(second.wait_for_exit(std::chrono::seconds(10)).has_value());
}

// A plugin removes its socket at exit only while the socket is still its own: one that another
// process created at the path meanwhile stays (a stopped orphan once took the live plugin's).
TEST_F(HostpathRestart, ASocketThatIsNotItsOwnAnyMoreIsLeftInPlace) {
  plugin_ = std::make_unique<HostpathPlugin>(dir_);
  ASSERT_NO_FATAL_FAILURE(plugin_->start());
  std::filesystem::remove(plugin_->socket());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, plugin_->socket().c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const auto st = plugin_->terminate();
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(std::filesystem::exists(plugin_->socket())) << plugin_->process().output();
  ::close(fd);
}

TEST_F(HostpathRestart, BadFlagsExitWithUsageError) {
  test::ChildProcess p({test::binary_path("mooring-hostpath"), {"--mode", "sideways"}, {}, false, dir_ / "out"});
  const auto st = p.wait_for_exit(std::chrono::seconds(30));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 2);
  EXPECT_NE(p.output().find("--mode"), std::string::npos);
}

}  // namespace
}  // namespace mooring::hostpath
