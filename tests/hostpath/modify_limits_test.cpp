// mooring-hostpath's CSI 1.12 calls and run-time limit: ControllerModifyVolume changes the
// mutable parameters it honours (tier, iops) and refuses others with INVALID_ARGUMENT, changing
// nothing; without MODIFY_VOLUME it is UNIMPLEMENTED and mutable parameters at create are
// refused; GetSnapshot reads one snapshot; --max-volumes-file is read again at every NodeGetInfo
// and ControllerPublish.
#include <gtest/gtest.h>

#include <fstream>

#include "plugins/hostpath/volume_store.hpp"
#include "tests/hostpath/plugin_harness.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
using grpc::StatusCode;
constexpr std::int64_t kMi = 1 << 20;

class HostpathModify : public PluginTest {
 protected:
  HostpathModify() : PluginTest("hp-modify") {}

  grpc::Status modify(const std::string& id, std::map<std::string, std::string> params) {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    csi::v1::ControllerModifyVolumeRequest r;
    r.set_volume_id(id);
    for (const auto& [k, v] : params) (*r.mutable_mutable_parameters())[k] = v;
    csi::v1::ControllerModifyVolumeResponse o;
    return plugin_->controller().ControllerModifyVolume(&ctx, r, &o);
  }
  bool advertises(csi::v1::ControllerServiceCapability::RPC::Type type) {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    csi::v1::ControllerGetCapabilitiesResponse caps;
    EXPECT_TRUE(plugin_->controller().ControllerGetCapabilities(&ctx, {}, &caps).ok());
    for (const auto& c : caps.capabilities())
      if (c.rpc().type() == type) return true;
    return false;
  }
  std::map<std::string, std::string> stored_mutable(const std::string& id) {
    // The plugin's catalogue as a second store on its data dir reads it (journal included).
    VolumeStore store(plugin_->data_dir());
    std::map<std::string, std::string> out;
    (void)store.read([&](const StoreState& s) {
      if (auto it = s.volumes.find(id); it != s.volumes.end()) out = it->second.mutable_parameters;
      return grpc::Status::OK;
    });
    return out;
  }
};

TEST_F(HostpathModify, ModifiesTheParametersItHonoursAndRefusesOthersChangingNothing) {
  ASSERT_NO_FATAL_FAILURE(start());
  EXPECT_TRUE(advertises(csi::v1::ControllerServiceCapability::RPC::MODIFY_VOLUME));
  EXPECT_TRUE(advertises(csi::v1::ControllerServiceCapability::RPC::GET_SNAPSHOT));
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("v", kMi, &vol).ok());
  const auto id = vol.volume_id();
  ASSERT_TRUE(modify(id, {{"tier", "fast"}}).ok());
  ASSERT_TRUE(modify(id, {{"tier", "fast"}}).ok());  // the same again: idempotent
  ASSERT_TRUE(modify(id, {{"iops", "500"}}).ok());
  EXPECT_EQ(stored_mutable(id), (std::map<std::string, std::string>{{"iops", "500"}, {"tier", "fast"}}));

  auto bad_tier = modify(id, {{"tier", "gold"}});
  EXPECT_EQ(bad_tier.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad_tier.error_message().find("standard, fast, archive"), std::string::npos);
  EXPECT_EQ(modify(id, {{"iops", "0"}}).error_code(), StatusCode::INVALID_ARGUMENT);
  auto unknown = modify(id, {{"iops", "10"}, {"colour", "red"}});
  EXPECT_EQ(unknown.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unknown.error_message().find("\"colour\""), std::string::npos);
  EXPECT_EQ(stored_mutable(id).at("iops"), "500");  // nothing of a refused request applied
  EXPECT_EQ(modify(id, {}).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(modify("vol-0000000000000000", {{"tier", "fast"}}).error_code(), StatusCode::NOT_FOUND);
}

TEST_F(HostpathModify, WithoutModifyVolumeNeitherModifyNorMutableParametersAtCreate) {
  ASSERT_NO_FATAL_FAILURE(start({.extra_args = {"--no-modify-volume"}}));
  EXPECT_FALSE(advertises(csi::v1::ControllerServiceCapability::RPC::MODIFY_VOLUME));
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("v", kMi, &vol).ok());
  EXPECT_EQ(modify(vol.volume_id(), {{"tier", "fast"}}).error_code(), StatusCode::UNIMPLEMENTED);
  grpc::ClientContext ctx;
  set_deadline(ctx);
  csi::v1::CreateVolumeRequest r;
  r.set_name("w");
  *r.add_volume_capabilities() = mount_capability(AM::SINGLE_NODE_WRITER);
  (*r.mutable_mutable_parameters())["tier"] = "fast";
  csi::v1::CreateVolumeResponse o;
  EXPECT_EQ(plugin_->controller().CreateVolume(&ctx, r, &o).error_code(), StatusCode::INVALID_ARGUMENT);
}

TEST_F(HostpathModify, GetSnapshotReadsOneSnapshot) {
  ASSERT_NO_FATAL_FAILURE(start());
  csi::v1::Volume vol;
  ASSERT_TRUE(plugin_->create_volume("v", kMi, &vol).ok());
  csi::v1::CreateSnapshotResponse made;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    csi::v1::CreateSnapshotRequest r;
    r.set_name("s");
    r.set_source_volume_id(vol.volume_id());
    ASSERT_TRUE(plugin_->controller().CreateSnapshot(&ctx, r, &made).ok());
  }
  grpc::ClientContext ctx;
  set_deadline(ctx);
  csi::v1::GetSnapshotRequest r;
  r.set_snapshot_id(made.snapshot().snapshot_id());
  csi::v1::GetSnapshotResponse got;
  ASSERT_TRUE(plugin_->controller().GetSnapshot(&ctx, r, &got).ok());
  EXPECT_EQ(got.snapshot().source_volume_id(), vol.volume_id());
  grpc::ClientContext ctx2;
  set_deadline(ctx2);
  r.set_snapshot_id("snap-none");
  EXPECT_EQ(plugin_->controller().GetSnapshot(&ctx2, r, &got).error_code(), StatusCode::NOT_FOUND);
}

TEST_F(HostpathModify, TheMaxVolumesFileIsReadAgainAtEveryNodeGetInfoAndPublish) {
  const auto file = dir_ / "max-volumes";
  std::ofstream(file) << "2\n";
  ASSERT_NO_FATAL_FAILURE(start({.extra_args = {"--max-volumes-file", file.string()}}));
  auto max_now = [&] {
    grpc::ClientContext ctx;
    set_deadline(ctx);
    csi::v1::NodeGetInfoResponse info;
    EXPECT_TRUE(plugin_->node().NodeGetInfo(&ctx, {}, &info).ok());
    return info.max_volumes_per_node();
  };
  EXPECT_EQ(max_now(), 2);
  csi::v1::Volume v1, v2;
  ASSERT_TRUE(plugin_->create_volume("v1", kMi, &v1).ok());
  ASSERT_TRUE(plugin_->create_volume("v2", kMi, &v2).ok());
  ASSERT_TRUE(plugin_->controller_publish(v1.volume_id(), "node-a", AM::SINGLE_NODE_WRITER).ok());
  std::ofstream(file) << "1\n";
  EXPECT_EQ(max_now(), 1);
  EXPECT_EQ(plugin_->controller_publish(v2.volume_id(), "node-a", AM::SINGLE_NODE_WRITER).error_code(),
            StatusCode::RESOURCE_EXHAUSTED);
  std::ofstream(file) << "not a number\n";  // unreadable: the --max-volumes figure (unlimited)
  EXPECT_EQ(max_now(), 0);
  EXPECT_TRUE(plugin_->controller_publish(v2.volume_id(), "node-a", AM::SINGLE_NODE_WRITER).ok());
}

}  // namespace
}  // namespace mooring::hostpath
