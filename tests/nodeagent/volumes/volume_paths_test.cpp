#include "services/nodeagent/volumes/volume_paths.hpp"

#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>

namespace mooring::nodeagent {
namespace {

using domain::AccessMode;
using domain::AttachmentMode;

TEST(VolumePathsTest, LayoutFollowsStagingAndPerAllocWithUsage) {
  VolumePaths paths("/var/lib/mooring/mounts");
  const auto usage = volume_usage(false, AttachmentMode::file_system, AccessMode::single_node_writer);
  EXPECT_EQ(usage, "rw-file-system-single-node-writer");
  EXPECT_EQ(volume_usage(true, AttachmentMode::block_device, AccessMode::multi_node_reader_only),
            "ro-block-device-multi-node-reader-only");
  EXPECT_EQ(paths.staging("vol1", usage)->string(), "/var/lib/mooring/mounts/staging/vol1/" + usage);
  EXPECT_EQ(paths.publish("alloc-1", "vol1", usage)->string(),
            "/var/lib/mooring/mounts/per-alloc/alloc-1/vol1/" + usage);
  EXPECT_EQ(paths.publish("a", "data[3]", usage)->string(), "/var/lib/mooring/mounts/per-alloc/a/data[3]/" + usage);
}

TEST(VolumePathsTest, IdsThatCouldEscapeTheRootAreRejectedWithTheirKind) {
  VolumePaths paths("/root/mounts");
  const std::string usage = "rw-file-system-single-node-writer";
  for (const char* bad : {"..", ".", "../x", "a/b", "", "a b", "x\\y"}) {
    auto staging = paths.staging(bad, usage);
    ASSERT_FALSE(staging.ok()) << bad;
    EXPECT_NE(staging.error().find("volume id"), std::string::npos) << staging.error();
    auto publish = paths.publish(bad, "vol", usage);
    ASSERT_FALSE(publish.ok()) << bad;
    EXPECT_NE(publish.error().find("allocation id"), std::string::npos) << publish.error();
  }
  EXPECT_FALSE(paths.staging("vol", "../../etc").ok());
  EXPECT_FALSE(paths.publish("a", "vol", "..").ok());
}

TEST(VolumePathsTest, DirectoriesAreCreated0700AndRemovedOnlyWhileEmpty) {
  test::TempDir dir("vol-paths");
  VolumePaths paths(dir / "mounts");
  auto staging = paths.staging("vol1", "rw-file-system-single-node-writer");
  ASSERT_TRUE(paths.ensure_dir(*staging).ok());
  for (auto p = *staging; p != dir.path(); p = p.parent_path()) {
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << p;
  }
  ASSERT_TRUE(paths.ensure_dir(*staging).ok());  // idempotent

  // A file inside keeps the directory (never a recursive delete).
  std::FILE* f = std::fopen((*staging / "keep").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  paths.remove_empty(*staging);
  EXPECT_TRUE(std::filesystem::exists(*staging / "keep"));
  std::filesystem::remove(*staging / "keep");
  paths.remove_empty(*staging);
  EXPECT_FALSE(std::filesystem::exists(*staging));
  EXPECT_FALSE(std::filesystem::exists(dir / "mounts" / "staging"));
  EXPECT_TRUE(std::filesystem::exists(dir / "mounts"));  // the root stays
}

}  // namespace
}  // namespace mooring::nodeagent
