// mooring-hostpath's block volumes, driven over its socket: a sparse backing file, a loop device
// attached at NodeStageVolume, the device node bind-mounted onto a file at the target, raw bytes
// through it land in the backing file, and unpublish/unstage/delete leave no device attached.
// Needs root and loop devices; skipped with the reason otherwise.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "plugins/hostpath/loop_device.hpp"
#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/files.hpp"
#include "tests/support/mountinfo.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
using grpc::StatusCode;
namespace fs = std::filesystem;
constexpr std::int64_t kMi = 1 << 20;

class HostpathBlock : public PluginTest {
 protected:
  HostpathBlock() : PluginTest("hp-block") {}
  void SetUp() override {
    MOORING_REQUIRE_ROOT();
    if (auto why = check_loop_support(); !why.empty())
      GTEST_SKIP() << "loop devices are not available here (" << why << "): block volumes cannot be tested";
    ASSERT_NO_FATAL_FAILURE(start());
  }
  void TearDown() override {
    PluginTest::TearDown();
    // Never leave a device of this test attached, whatever failed.
    for (const auto& image : images_)
      for (const auto& device : loops_backed_by(image)) detach_loop(device);
  }

  csi::v1::Volume create(const std::string& name, std::int64_t bytes) {
    csi::v1::Volume vol;
    const auto st = plugin_->create_volume(name, bytes, &vol, block_);
    EXPECT_TRUE(st.ok()) << st.error_message();
    images_.push_back(image_of(vol));
    return vol;
  }
  static fs::path image_of(const csi::v1::Volume& v) { return fs::path(v.volume_context().at("path")) / kBlockImage; }
  grpc::Status stage(const std::string& id) { return plugin_->stage(id, staging(), block_); }
  grpc::Status publish(const std::string& id, const fs::path& target, bool readonly = false) {
    return plugin_->publish(id, staging(), target, block_, readonly);
  }
  fs::path staging() const { return dir_ / "staging"; }
  fs::path target() const { return dir_ / "pub" / "dev"; }

  const csi::v1::VolumeCapability block_ = block_capability(AM::SINGLE_NODE_WRITER);
  std::vector<fs::path> images_;
};

std::int64_t device_size(const fs::path& device) {
  const int fd = ::open(device.c_str(), O_RDONLY | O_CLOEXEC);
  std::uint64_t size = 0;
  if (fd >= 0) {
    ::ioctl(fd, BLKGETSIZE64, &size);
    ::close(fd);
  }
  return static_cast<std::int64_t>(size);
}

TEST_F(HostpathBlock, RawBytesWrittenThroughThePublishedDeviceLandInTheBackingFileAndNothingStaysAttached) {
  const auto vol = create("raw", 8 * kMi);
  const auto image = image_of(vol);
  struct stat st {};
  ASSERT_EQ(::stat(image.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8 * kMi);
  EXPECT_LT(st.st_blocks * 512, kMi) << "the backing file is sparse";
  EXPECT_TRUE(loops_backed_by(image).empty());

  ASSERT_TRUE(stage(vol.volume_id()).ok());
  EXPECT_FALSE(test::is_mounted(staging()));  // staged by attaching, nothing mounted there
  ASSERT_EQ(loops_backed_by(image).size(), 1u);
  EXPECT_TRUE(stage(vol.volume_id()).ok());  // idempotent: still one device
  EXPECT_EQ(loops_backed_by(image).size(), 1u);

  fs::create_directories(target().parent_path());
  ASSERT_TRUE(publish(vol.volume_id(), target()).ok());
  ASSERT_EQ(::stat(target().c_str(), &st), 0);
  EXPECT_TRUE(S_ISBLK(st.st_mode)) << "the target is the device node";
  EXPECT_TRUE(test::is_mounted(target()));
  EXPECT_EQ(device_size(target()), 8 * kMi);
  {
    const int fd = ::open(target().c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string bytes = "raw bytes at 1 MiB";
    EXPECT_EQ(::pwrite(fd, bytes.data(), bytes.size(), kMi), static_cast<ssize_t>(bytes.size()));
    ::fsync(fd);
    ::close(fd);
  }
  {
    const int fd = ::open(image.c_str(), O_RDONLY | O_CLOEXEC);
    char buf[18] = {};
    EXPECT_EQ(::pread(fd, buf, sizeof buf, kMi), static_cast<ssize_t>(sizeof buf));
    ::close(fd);
    EXPECT_EQ(std::string(buf, sizeof buf), "raw bytes at 1 MiB");
  }
  // Stats: the device's size; its condition while attached.
  csi::v1::NodeGetVolumeStatsRequest sreq;
  sreq.set_volume_id(vol.volume_id());
  sreq.set_volume_path(target().string());
  csi::v1::NodeGetVolumeStatsResponse sresp;
  grpc::ClientContext sctx;
  set_deadline(sctx);
  ASSERT_TRUE(plugin_->node().NodeGetVolumeStats(&sctx, sreq, &sresp).ok());
  ASSERT_EQ(sresp.usage_size(), 1);
  EXPECT_EQ(sresp.usage(0).total(), 8 * kMi);
  EXPECT_FALSE(sresp.volume_condition().abnormal()) << sresp.volume_condition().message();

  // A volume in use is not deleted; released, nothing of it stays.
  EXPECT_EQ(plugin_->delete_volume(vol.volume_id()).error_code(), StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(plugin_->unpublish(vol.volume_id(), target()).ok());
  EXPECT_FALSE(fs::exists(target()));
  EXPECT_EQ(loops_backed_by(image).size(), 1u);  // still staged
  ASSERT_TRUE(plugin_->unstage(vol.volume_id(), staging()).ok());
  EXPECT_TRUE(loops_backed_by(image).empty());
  EXPECT_TRUE(plugin_->unstage(vol.volume_id(), staging()).ok());  // idempotent
  ASSERT_TRUE(plugin_->delete_volume(vol.volume_id()).ok());
  EXPECT_FALSE(fs::exists(image.parent_path()));
}

TEST_F(HostpathBlock, AReadOnlyPublishOfAWritableStageGetsItsOwnReadOnlyDevice) {
  const auto vol = create("ro", 4 * kMi);
  ASSERT_TRUE(stage(vol.volume_id()).ok());
  fs::create_directories(target().parent_path());
  ASSERT_TRUE(publish(vol.volume_id(), target(), /*readonly=*/true).ok());
  EXPECT_EQ(loops_backed_by(image_of(vol)).size(), 2u);
  // A read-only bind of a device node would not stop this; a read-only loop device does.
  const int fd = ::open(target().c_str(), O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    EXPECT_LT(::pwrite(fd, "x", 1, 0), 0) << "a write through a read-only publish succeeded";
    ::close(fd);
  }
  ASSERT_TRUE(plugin_->unpublish(vol.volume_id(), target()).ok());
  EXPECT_EQ(loops_backed_by(image_of(vol)).size(), 1u);
  ASSERT_TRUE(plugin_->unstage(vol.volume_id(), staging()).ok());
  EXPECT_TRUE(loops_backed_by(image_of(vol)).empty());
}

TEST_F(HostpathBlock, ExpansionGrowsTheBackingFileAndTheNodeRefreshesTheDevice) {
  const auto vol = create("grow", 4 * kMi);
  ASSERT_TRUE(stage(vol.volume_id()).ok());
  fs::create_directories(target().parent_path());
  ASSERT_TRUE(publish(vol.volume_id(), target()).ok());
  csi::v1::ControllerExpandVolumeRequest creq;
  creq.set_volume_id(vol.volume_id());
  creq.mutable_capacity_range()->set_required_bytes(6 * kMi);
  *creq.mutable_volume_capability() = block_;
  csi::v1::ControllerExpandVolumeResponse cresp;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ASSERT_TRUE(plugin_->controller().ControllerExpandVolume(&ctx, creq, &cresp).ok());
  }
  EXPECT_TRUE(cresp.node_expansion_required()) << "the loop device must be told";
  EXPECT_EQ(fs::file_size(image_of(vol)), static_cast<std::uintmax_t>(6 * kMi));
  csi::v1::NodeExpandVolumeRequest nreq;
  nreq.set_volume_id(vol.volume_id());
  nreq.set_volume_path(target().string());
  nreq.mutable_capacity_range()->set_required_bytes(6 * kMi);
  csi::v1::NodeExpandVolumeResponse nresp;
  grpc::ClientContext ctx;
  set_deadline(ctx);
  ASSERT_TRUE(plugin_->node().NodeExpandVolume(&ctx, nreq, &nresp).ok());
  EXPECT_EQ(nresp.capacity_bytes(), 6 * kMi);
  EXPECT_EQ(device_size(target()), 6 * kMi);
  ASSERT_TRUE(plugin_->unpublish(vol.volume_id(), target()).ok());
  ASSERT_TRUE(plugin_->unstage(vol.volume_id(), staging()).ok());
}

TEST_F(HostpathBlock, AStagedDeviceSurvivesAPluginCrashAndIsDetachedByTheRestartedPlugin) {
  const auto vol = create("crash", 4 * kMi);
  ASSERT_TRUE(stage(vol.volume_id()).ok());
  plugin_->restart();  // kill -9 and start again
  EXPECT_EQ(loops_backed_by(image_of(vol)).size(), 1u);
  EXPECT_TRUE(stage(vol.volume_id()).ok());  // recognised: no second device
  EXPECT_EQ(loops_backed_by(image_of(vol)).size(), 1u);
  ASSERT_TRUE(plugin_->unstage(vol.volume_id(), staging()).ok());
  EXPECT_TRUE(loops_backed_by(image_of(vol)).empty());
}

TEST_F(HostpathBlock, AccessTypesMustFitTheVolume) {
  const auto blk = create("blk", kMi);
  csi::v1::Volume dir;
  ASSERT_TRUE(plugin_->create_volume("dir", kMi, &dir).ok());
  // Node: mount access to a block volume exceeds its capabilities.
  EXPECT_EQ(plugin_->stage(blk.volume_id(), staging(), AM::SINGLE_NODE_WRITER).error_code(),
            StatusCode::FAILED_PRECONDITION);
  // Controller: validation confirms only the volume's own access type.
  auto validate = [&](const std::string& id, const csi::v1::VolumeCapability& cap) {
    csi::v1::ValidateVolumeCapabilitiesRequest r;
    r.set_volume_id(id);
    *r.add_volume_capabilities() = cap;
    csi::v1::ValidateVolumeCapabilitiesResponse o;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    EXPECT_TRUE(plugin_->controller().ValidateVolumeCapabilities(&ctx, r, &o).ok());
    return o;
  };
  EXPECT_TRUE(validate(blk.volume_id(), block_).has_confirmed());
  const auto refused = validate(blk.volume_id(), mount_capability(AM::SINGLE_NODE_WRITER));
  EXPECT_FALSE(refused.has_confirmed());
  EXPECT_NE(refused.message().find("block volume"), std::string::npos) << refused.message();
  EXPECT_FALSE(validate(dir.volume_id(), block_).has_confirmed());
  // CreateVolume: one access type per volume, and a name keeps its type.
  csi::v1::CreateVolumeRequest mixed;
  mixed.set_name("mixed");
  *mixed.add_volume_capabilities() = block_;
  *mixed.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  csi::v1::CreateVolumeResponse o;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    EXPECT_EQ(plugin_->controller().CreateVolume(&ctx, mixed, &o).error_code(), StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(plugin_->create_volume("blk", kMi, nullptr).error_code(), StatusCode::ALREADY_EXISTS);
}

}  // namespace
}  // namespace mooring::hostpath
