// ValidateVolumeCapabilities of mooring-hostpath, one case each (spec v1.12): the answer for an
// unknown volume, confirmation only when every capability fits the volume, and the reason in the
// message when not. Block volumes (loop devices) are in block_test.cpp.
#include <gtest/gtest.h>

#include "tests/hostpath/plugin_harness.hpp"

namespace mooring::hostpath {
namespace {

using AM = csi::v1::VolumeCapability::AccessMode;
using grpc::StatusCode;
constexpr std::int64_t kMi = 1 << 20;

class HostpathValidate : public PluginTest {
 protected:
  HostpathValidate() : PluginTest("hp-validate") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_TRUE(plugin_->create_volume("dir", kMi, &volume_).ok());
  }
  grpc::Status validate(const std::string& id, std::vector<csi::v1::VolumeCapability> caps,
                        csi::v1::ValidateVolumeCapabilitiesResponse& out) {
    csi::v1::ValidateVolumeCapabilitiesRequest r;
    r.set_volume_id(id);
    for (auto& c : caps) *r.add_volume_capabilities() = c;
    (*r.mutable_volume_context())["zone"] = "a";
    (*r.mutable_parameters())["tier"] = "gold";
    (*r.mutable_secrets())["token"] = "s3cr3t";
    grpc::ClientContext ctx;
    set_deadline(ctx);
    return plugin_->controller().ValidateVolumeCapabilities(&ctx, r, &out);
  }
  csi::v1::Volume volume_;
};

TEST_F(HostpathValidate, AnUnknownVolumeIsNotFound) {
  csi::v1::ValidateVolumeCapabilitiesResponse out;
  EXPECT_EQ(validate("no-such-volume", {mount_capability(AM::SINGLE_NODE_WRITER)}, out).error_code(),
            StatusCode::NOT_FOUND);
}

TEST_F(HostpathValidate, MountAccessToADirectoryVolumeIsConfirmedWithWhatWasValidated) {
  csi::v1::ValidateVolumeCapabilitiesResponse out;
  ASSERT_TRUE(validate(volume_.volume_id(), {mount_capability(AM::MULTI_NODE_MULTI_WRITER)}, out).ok());
  ASSERT_TRUE(out.has_confirmed());
  EXPECT_EQ(out.confirmed().volume_capabilities_size(), 1);
  EXPECT_EQ(out.confirmed().volume_context().at("zone"), "a");
  EXPECT_EQ(out.confirmed().parameters().at("tier"), "gold");
}

TEST_F(HostpathValidate, BlockAccessToADirectoryVolumeIsNotConfirmedAndSaysWhy) {
  csi::v1::ValidateVolumeCapabilitiesResponse out;
  ASSERT_TRUE(validate(volume_.volume_id(), {block_capability(AM::SINGLE_NODE_WRITER)}, out).ok());
  EXPECT_FALSE(out.has_confirmed());
  EXPECT_NE(out.message().find("not block"), std::string::npos) << out.message();
}

TEST_F(HostpathValidate, ACapabilityWithoutAnAccessTypeIsNotConfirmed) {
  csi::v1::VolumeCapability no_type;
  no_type.mutable_access_mode()->set_mode(AM::SINGLE_NODE_WRITER);
  csi::v1::ValidateVolumeCapabilitiesResponse out;
  ASSERT_TRUE(validate(volume_.volume_id(), {no_type}, out).ok());
  EXPECT_FALSE(out.has_confirmed());
  EXPECT_NE(out.message().find("access_type"), std::string::npos) << out.message();
}

TEST_F(HostpathValidate, AnUnknownAccessModeIsNotConfirmed) {
  csi::v1::ValidateVolumeCapabilitiesResponse out;
  ASSERT_TRUE(validate(volume_.volume_id(), {mount_capability(AM::UNKNOWN)}, out).ok());
  EXPECT_FALSE(out.has_confirmed());
  EXPECT_NE(out.message().find("access_mode"), std::string::npos) << out.message();
}

TEST_F(HostpathValidate, OneUnsupportedCapabilityAmongSeveralConfirmsNone) {
  csi::v1::ValidateVolumeCapabilitiesResponse out;
  ASSERT_TRUE(validate(volume_.volume_id(),
                       {mount_capability(AM::SINGLE_NODE_WRITER), block_capability(AM::SINGLE_NODE_WRITER)}, out)
                  .ok());
  EXPECT_FALSE(out.has_confirmed());
  EXPECT_FALSE(out.message().empty());
}

TEST_F(HostpathValidate, SecretsNeverReachTheCallLog) {
  csi::v1::ValidateVolumeCapabilitiesResponse out;
  ASSERT_TRUE(validate(volume_.volume_id(), {mount_capability(AM::SINGLE_NODE_WRITER)}, out).ok());
  for (const auto& call : plugin_->calls()) EXPECT_EQ(call.dump().find("s3cr3t"), std::string::npos);
}

}  // namespace
}  // namespace mooring::hostpath
