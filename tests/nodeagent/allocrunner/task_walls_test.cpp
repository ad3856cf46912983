// The runner's side of a task's walls (issue 41): who a task runs as on this node. (Its volumes
// get its group where they are mounted: tests/nodeagent/volumes, tests/shared/mounts.)
#include "services/nodeagent/allocrunner/task_walls.hpp"

#include <gtest/gtest.h>

namespace mooring::nodeagent {
namespace {

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
