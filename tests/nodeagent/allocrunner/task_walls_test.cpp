// The runner's side of a task's walls (issue 41): who a task runs as on this node. (Its volumes
// get its group where they are mounted: tests/nodeagent/volumes, tests/shared/mounts.)
#include "services/nodeagent/allocrunner/task_walls.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "tests/support/root.hpp"
#include "tests/support/temp_dir.hpp"

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

// Without walls, a non-root task's directory and volume are reached on the host's paths under the
// agent's data dir (0700): the shared levels become traversable (0711, not listable), the
// allocation's own levels root's and the task's group's (0710); another allocation's stay shut.
TEST(TaskWalls, WithoutWallsTheWayToItsDirectoryAndVolumesOpensForItsGroupOnly) {
  MOORING_REQUIRE_ROOT();
  namespace fs = std::filesystem;
  test::TempDir tmp{"mooring-task-walls"};
  const auto data = tmp.make_dir("data");
  const auto volume = tmp.make_dir("data/mounts/per-alloc/a1/vol/rw-file-system");
  const auto other = tmp.make_dir("data/mounts/per-alloc/a2/vol/rw-file-system");
  for (const auto& d : {data, data / "mounts", data / "mounts/per-alloc", data / "mounts/per-alloc/a1",
                        data / "mounts/per-alloc/a1/vol", data / "mounts/per-alloc/a2"})
    fs::permissions(d, fs::perms::owner_all);
  domain::Allocation alloc;
  alloc.id = "a1";
  alloc.task = domain::Task{};
  alloc.task->command = "sh";
  alloc.task->user = "1234:4321";
  alloc.volumes["vol"] = domain::VolumeRequest{};
  TaskWallsOptions options;
  options.namespaces = false;
  options.data_dir = data;
  TaskSpec spec;
  ASSERT_TRUE(
      wall_task(alloc, data / "allocs" / "a1", {{domain::volume_env_var("vol"), volume.string()}}, options, spec));
  const auto mode_of = [](const fs::path& p) {
    struct stat st {};
    ::stat(p.c_str(), &st);
    return std::pair{st.st_mode & 07777, st.st_gid};
  };
  EXPECT_EQ(mode_of(data), std::pair(0711u, 0u));
  EXPECT_EQ(mode_of(data / "mounts/per-alloc"), std::pair(0711u, 0u));
  EXPECT_EQ(mode_of(data / "allocs"), std::pair(0711u, 0u));
  EXPECT_EQ(mode_of(data / "allocs/a1"), std::pair(0710u, 4321u));
  EXPECT_EQ(mode_of(data / "mounts/per-alloc/a1"), std::pair(0710u, 4321u));
  EXPECT_EQ(mode_of(data / "mounts/per-alloc/a1/vol"), std::pair(0710u, 4321u));
  EXPECT_EQ(mode_of(data / "mounts/per-alloc/a2"), std::pair(0700u, 0u));  // another allocation's: shut
  struct stat local {};
  ASSERT_EQ(::stat((data / "allocs/a1/local").c_str(), &local), 0);
  EXPECT_EQ(local.st_uid, 1234u);
  EXPECT_EQ(local.st_mode & 07777, 0700u);

  // With walls nothing on the host is opened: the task sees its paths through its own root.
  const auto walled = tmp.make_dir("walled");
  fs::permissions(walled, fs::perms::owner_all);
  options.namespaces = true;
  options.data_dir = walled;
  alloc.id = "a3";
  TaskSpec walled_spec;
  ASSERT_TRUE(wall_task(alloc, walled / "allocs" / "a3", {}, options, walled_spec));
  EXPECT_EQ(mode_of(walled), std::pair(0700u, 0u));
}

}  // namespace
}  // namespace mooring::nodeagent
