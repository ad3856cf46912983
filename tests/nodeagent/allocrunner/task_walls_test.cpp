// The runner's side of a task's walls (issue 41): who a task runs as on this node, and the
// OnRootMismatch group change a non-root task's writable volume gets once.
#include "services/nodeagent/allocrunner/task_walls.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/support/files.hpp"
#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

namespace mooring::nodeagent {
namespace {

namespace fs = std::filesystem;

TEST(TaskWalls, TheUserIsResolvedAndCheckedAgainstTheNodesRules) {
  const domain::TaskUserRules rules;
  const auto nobody = resolve_task_user("", rules);
  ASSERT_TRUE(nobody) << nobody.error();
  EXPECT_EQ(nobody->uid, 65534u);
  EXPECT_EQ(nobody->gid, 65534u);
  const auto given = resolve_task_user("1000:5", rules);
  ASSERT_TRUE(given);
  EXPECT_EQ(given->gid, 5u);
  const auto unnamed = resolve_task_user("54321", rules);  // no such user: its own number as group
  ASSERT_TRUE(unnamed);
  EXPECT_EQ(unnamed->gid, 54321u);
  const auto unknown = resolve_task_user("no-such-user-here", rules);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("not a user on this node"), std::string::npos) << unknown.error();
  const auto root = resolve_task_user("root", rules);
  ASSERT_FALSE(root);
  EXPECT_NE(root.error().find("user_denylist"), std::string::npos) << root.error();
}

TEST(TaskWalls, AWritableVolumeGetsTheTasksGroupOnceAndIsNotWalkedAgain) {
  MOORING_REQUIRE_ROOT();
  test::TempDir dir{"mooring-walls-vol"};
  const auto vol = dir.make_dir("vol");
  fs::create_directories(vol / "sub");
  test::write_file(vol / "sub" / "file", "data");
  const auto walked = give_volume_to_group(vol, 65534);
  ASSERT_TRUE(walked) << walked.error();
  EXPECT_TRUE(*walked);
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
  ::chown((vol / "later").c_str(), 0, 0);
  const auto again = give_volume_to_group(vol, 65534);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  struct stat later {};
  ::stat((vol / "later").c_str(), &later);
  EXPECT_EQ(later.st_gid, 0u);
}

TEST(TaskWalls, APluginTaskIsNotWalled) {
  domain::Allocation alloc;
  alloc.id = "a1";
  alloc.task = domain::Task{};
  alloc.task->command = "plugin";
  alloc.task->csi_plugin = domain::TaskCSIPlugin{};
  TaskSpec spec;
  ASSERT_TRUE(wall_task(alloc, "/nonexistent", {}, TaskWallsOptions{}, spec));
  EXPECT_FALSE(spec.walls);
  EXPECT_TRUE(spec.cgroup.empty());
}

}  // namespace
}  // namespace mooring::nodeagent
