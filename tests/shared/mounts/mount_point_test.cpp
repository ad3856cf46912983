#include "shared/mounts/mount_point.hpp"

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::mounts {
namespace {

namespace fs = std::filesystem;

TEST(MountPoint, ParsesMountPointsWithEscapes) {
  const auto points = parse_mount_points(
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "40 22 8:1 /vols/a /tmp/with\\040space rw - ext4 /dev/sda1 rw\n");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0], "/");
  EXPECT_EQ(points[1], "/tmp/with space");
}

TEST(MountPoint, PlainDirectoriesAndMissingPathsAreNoMountPoints) {
  test::TempDir dir("mp-plain");
  const auto inside = dir.make_dir("a/b");
  EXPECT_TRUE(is_mount_point("/"));
  EXPECT_TRUE(is_mount_point_in_mountinfo("/"));
  for (const fs::path& p : {dir.path(), inside, dir / "missing", dir / "missing/deeper"}) {
    EXPECT_FALSE(is_mount_point(p)) << p;
    EXPECT_FALSE(is_mount_point_in_mountinfo(p)) << p;
  }
}

// The statx answer and the mountinfo answer agree on a bind mount, on a symlink to it, with a
// trailing slash, inside it, and after it is unmounted.
TEST(MountPoint, ABindMountIsOneAndWhatIsInsideItIsNot) {
  MOORING_REQUIRE_ROOT();
  test::TempDir dir("mp-bind");
  const auto source = dir.make_dir("source");
  const auto target = dir.make_dir("target");
  fs::create_directories(source / "sub");
  fs::create_symlink(target, dir / "link");
  ASSERT_EQ(::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);

  const auto both = [](const fs::path& p) {
    const bool fast = is_mount_point(p);
    EXPECT_EQ(fast, is_mount_point_in_mountinfo(p)) << p;
    return fast;
  };
  EXPECT_TRUE(both(target));
  EXPECT_TRUE(both(target.string() + "/"));
  EXPECT_TRUE(both(dir / "link"));
  EXPECT_FALSE(both(target / "sub"));
  EXPECT_FALSE(both(source));

  ASSERT_EQ(::umount2(target.c_str(), 0), 0) << std::strerror(errno);
  EXPECT_FALSE(both(target));
}

TEST(MountPoint, AMountStackedOnAnotherIsStillOne) {
  MOORING_REQUIRE_ROOT();
  test::TempDir dir("mp-stack");
  const auto a = dir.make_dir("a");
  const auto b = dir.make_dir("b");
  const auto target = dir.make_dir("target");
  ASSERT_EQ(::mount(a.c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(::mount(b.c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
  EXPECT_TRUE(is_mount_point(target));
  ASSERT_EQ(::umount2(target.c_str(), 0), 0);
  EXPECT_TRUE(is_mount_point(target));
  ASSERT_EQ(::umount2(target.c_str(), 0), 0);
  EXPECT_FALSE(is_mount_point(target));
}

}  // namespace
}  // namespace mooring::mounts
