// A volume's tree given a task's group (shared/mounts/volume_group.hpp): OnRootMismatch walks
// once and not again while the root has the group; Always walks every time.
#include "shared/mounts/volume_group.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/support/files.hpp"
#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::mounts {
namespace {

namespace fs = std::filesystem;

gid_t group_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_gid;
}

TEST(VolumeGroup, TheTreeGetsTheGroupOnceAndIsNotWalkedAgainWhileTheRootHasIt) {
  MOORING_REQUIRE_ROOT();
  test::TempDir dir{"mooring-volume-group"};
  const auto vol = dir.make_dir("vol");
  fs::create_directories(vol / "sub");
  test::write_file(vol / "sub" / "file", "data");
  const auto walked = give_tree_to_group(vol, 65534, /*always=*/false);
  ASSERT_TRUE(walked.error.empty()) << walked.error;
  EXPECT_TRUE(walked.walked);
  for (const auto& p : {vol, vol / "sub", vol / "sub" / "file"}) {
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_gid, 65534u) << p;
    EXPECT_TRUE(st.st_mode & S_IWGRP) << p;
    if (S_ISDIR(st.st_mode)) {
      EXPECT_TRUE(st.st_mode & S_ISGID) << p;
    }
  }
  // A file added later as root keeps root's group: the root matches, so no walk.
  test::write_file(vol / "later", "x");
  ASSERT_EQ(::chown((vol / "later").c_str(), 0, 0), 0);
  const auto again = give_tree_to_group(vol, 65534, /*always=*/false);
  ASSERT_TRUE(again.error.empty()) << again.error;
  EXPECT_FALSE(again.walked);
  EXPECT_EQ(group_of(vol / "later"), 0u);
  // Always walks whatever the root says.
  const auto always = give_tree_to_group(vol, 65534, /*always=*/true);
  ASSERT_TRUE(always.error.empty()) << always.error;
  EXPECT_TRUE(always.walked);
  EXPECT_EQ(group_of(vol / "later"), 65534u);
}

TEST(VolumeGroup, AMissingRootIsNamed) {
  const auto r = give_tree_to_group("/nonexistent/mooring-volume", 65534, false);
  EXPECT_FALSE(r.walked);
  EXPECT_NE(r.error.find("/nonexistent/mooring-volume"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace mooring::mounts
