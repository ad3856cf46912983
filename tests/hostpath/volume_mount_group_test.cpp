// VOLUME_MOUNT_GROUP in mooring-hostpath (issue 41): advertised unless --no-volume-mount-group;
// NodeStage and NodePublish give a writable volume's files the group they name (setgid
// directories); a read-only publish changes nothing; a malformed group, or one sent to a plugin
// that does not advertise the capability, is INVALID_ARGUMENT.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/hostpath/plugin_harness.hpp"
#include "tests/support/files.hpp"
#include "tests/support/root.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
namespace fs = std::filesystem;

class HostpathMountGroup : public PluginTest {
 protected:
  HostpathMountGroup() : PluginTest("hp-mount-group") {}
  bool advertised() {
    csi::v1::NodeGetCapabilitiesRequest req;
    csi::v1::NodeGetCapabilitiesResponse resp;
    grpc::ClientContext ctx;
    set_deadline(ctx);
    EXPECT_TRUE(plugin_->node().NodeGetCapabilities(&ctx, req, &resp).ok());
    for (const auto& c : resp.capabilities())
      if (c.rpc().type() == csi::v1::NodeServiceCapability::RPC::VOLUME_MOUNT_GROUP) return true;
    return false;
  }
  static csi::v1::VolumeCapability for_group(const std::string& group) {
    auto cap = mount_capability(AM::SINGLE_NODE_WRITER);
    cap.mutable_mount()->set_volume_mount_group(group);
    return cap;
  }
  static struct stat stat_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st;
  }
};

TEST_F(HostpathMountGroup, StageAndPublishGiveTheVolumeTheGroupTheyName) {
  MOORING_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(start());
  EXPECT_TRUE(advertised());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("grouped", 1 << 20, &vol).ok());
  const auto dir = plugin_->data_dir() / "volumes" / vol.volume_id();
  test::write_file(dir / "before", "x");
  const auto staging = dir_.make_dir("staging");
  auto st = plugin_->stage(vol.volume_id(), staging, for_group("nobody"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("numeric"), std::string::npos) << st.error_message();
  st = plugin_->stage(vol.volume_id(), staging, for_group("65534"));
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(stat_of(dir).st_gid, 65534u);
  EXPECT_TRUE(stat_of(dir).st_mode & S_ISGID);
  EXPECT_EQ(stat_of(dir / "before").st_gid, 65534u);
  EXPECT_TRUE(stat_of(dir / "before").st_mode & S_IWGRP);

  // A read-only publish for another group changes nothing; a writable one does.
  const auto ro = dir_ / "ro";
  ASSERT_TRUE(plugin_->publish(vol.volume_id(), staging, ro, for_group("4242"), /*readonly=*/true).ok());
  EXPECT_EQ(stat_of(dir).st_gid, 65534u);
  const auto rw = dir_ / "rw";
  ASSERT_TRUE(plugin_->publish(vol.volume_id(), staging, rw, for_group("4242")).ok());
  EXPECT_EQ(stat_of(dir / "before").st_gid, 4242u);
  for (const auto& t : {ro, rw}) EXPECT_TRUE(plugin_->unpublish(vol.volume_id(), t).ok());
  EXPECT_TRUE(plugin_->unstage(vol.volume_id(), staging).ok());
}

TEST_F(HostpathMountGroup, WithoutTheCapabilityTheFieldIsRefusedAndNothingChanges) {
  MOORING_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(start(PluginSetup{.extra_args = {"--no-volume-mount-group"}}));
  EXPECT_FALSE(advertised());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("plain", 1 << 20, &vol).ok());
  const auto dir = plugin_->data_dir() / "volumes" / vol.volume_id();
  const auto staging = dir_.make_dir("staging");
  const auto st = plugin_->stage(vol.volume_id(), staging, for_group("65534"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("VOLUME_MOUNT_GROUP"), std::string::npos) << st.error_message();
  EXPECT_EQ(stat_of(dir).st_gid, 0u);
  ASSERT_TRUE(plugin_->stage(vol.volume_id(), staging, AM::SINGLE_NODE_WRITER).ok());
  EXPECT_TRUE(plugin_->unstage(vol.volume_id(), staging).ok());
}

}  // namespace
}  // namespace mooring::hostpath
