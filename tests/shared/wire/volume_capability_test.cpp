// The csi.v1 VolumeCapability built from a volume's modes and mount options.
#include "shared/wire/volume_capability.hpp"

#include <gtest/gtest.h>

namespace mooring::domain {
namespace {

TEST(CsiCapability, FileSystemCarriesMountOptions) {
  auto cap = csi_volume_capability(AccessMode::multi_node_single_writer, AttachmentMode::file_system,
                                   {"ext4", {"noatime"}});
  ASSERT_TRUE(cap.ok()) << cap.error();
  EXPECT_EQ(cap->access_mode().mode(), ::csi::v1::VolumeCapability::AccessMode::MULTI_NODE_SINGLE_WRITER);
  ASSERT_TRUE(cap->has_mount());
  EXPECT_EQ(cap->mount().fs_type(), "ext4");
  ASSERT_EQ(cap->mount().mount_flags_size(), 1);
  EXPECT_EQ(cap->mount().mount_flags(0), "noatime");
}

TEST(CsiCapability, BlockDeviceHasNoMount) {
  auto cap = csi_volume_capability(AccessMode::single_node_writer, AttachmentMode::block_device, {"ext4", {"x"}});
  ASSERT_TRUE(cap.ok());
  EXPECT_TRUE(cap->has_block());
  EXPECT_FALSE(cap->has_mount());
  EXPECT_EQ(cap->access_mode().mode(), ::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
}

TEST(CsiCapability, UnknownModesAreErrors) {
  auto cap = csi_volume_capability(AccessMode::unknown, AttachmentMode::file_system, {});
  ASSERT_FALSE(cap.ok());
  EXPECT_NE(cap.error().find("access mode"), std::string::npos);
  cap = csi_volume_capability(AccessMode::single_node_writer, AttachmentMode::unknown, {});
  ASSERT_FALSE(cap.ok());
  EXPECT_NE(cap.error().find("attachment mode"), std::string::npos);
}

}  // namespace
}  // namespace mooring::domain
