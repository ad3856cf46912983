// Task users and a node's rules (issue 41): what Task.User may say, and which users a node
// refuses, with the rule named.
#include "shared/domain/task_user.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "shared/domain/json.hpp"

namespace mooring::domain {
namespace {

TEST(TaskUser, ANameAUidOrUidGidIsAUserAnythingElseIsNot) {
  EXPECT_EQ(parse_task_user("nobody")->name, "nobody");
  EXPECT_EQ(*parse_task_user("1000")->uid, 1000u);
  const auto both = parse_task_user("1000:100");
  EXPECT_EQ(*both->uid, 1000u);
  EXPECT_EQ(*both->gid, 100u);
  for (const char* bad : {"", "a b", "../x", "1000:", ":100", "-x", "x:y", "1000:100:1"})
    EXPECT_FALSE(parse_task_user(bad)) << bad;
}

TEST(TaskUser, TheDefaultNodeRefusesRootByEveryNameAndRunsNobody) {
  const TaskUserRules rules;
  EXPECT_EQ(refused_user("", rules), std::nullopt);  // nobody
  EXPECT_EQ(effective_user("", rules), "nobody");
  for (const char* root : {"root", "0", "0:0"}) {
    const auto refused = refused_user(root, rules);
    ASSERT_TRUE(refused) << root;
    EXPECT_NE(refused->find("user_denylist"), std::string::npos) << *refused;
  }
  // A second name for uid 0, once the agent resolved it.
  EXPECT_TRUE(refused_user("toor", rules, 0u));
}

TEST(TaskUser, RootRunsOnlyWhereTheNodeAllowsIt) {
  TaskUserRules rules;
  rules.denylist.clear();
  const auto refused = refused_user("root", rules);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("allow_root rule is off"), std::string::npos) << *refused;
  rules.allow_root = true;
  EXPECT_EQ(refused_user("root", rules), std::nullopt);
  EXPECT_EQ(refused_user("0:0", rules), std::nullopt);
}

TEST(TaskUser, TheDenylistMatchesNamesAndUids) {
  TaskUserRules rules;
  rules.denylist = {"root", "postgres", "1001"};
  EXPECT_TRUE(refused_user("postgres", rules));
  EXPECT_TRUE(refused_user("1001", rules));
  EXPECT_TRUE(refused_user("1001:5", rules));
  EXPECT_TRUE(refused_user("alice", rules, 1001u));
  EXPECT_FALSE(refused_user("alice", rules, 1002u));
}

TEST(TaskUser, TheRulesTravelAsNodeAttributes) {
  TaskUserRules rules{"app", {"root", "1001"}, true};
  EXPECT_EQ(task_user_rules_from(task_user_attributes(rules)), rules);
  // A node that reports no rules gets the defaults: the safe side.
  EXPECT_EQ(task_user_rules_from({}), TaskUserRules{});
}

TEST(TaskUser, SubmitRefusesAMalformedUserNamingTheField) {
  const auto bad = allocation_from_api(nlohmann::json::parse(
      R"({"Name": "web", "Task": {"Command": "true", "User": "x y"}})"));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("User"), std::string::npos) << bad.error();
  const auto good = allocation_from_api(nlohmann::json::parse(
      R"({"Name": "web", "Task": {"Command": "true", "User": "1000:100", "Resources": {"CPU": 500, "MemoryMB": 64}}})"));
  ASSERT_TRUE(good) << good.error();
  EXPECT_EQ(good->task->user, "1000:100");
  EXPECT_EQ(good->task->resources.cpu, 500);
  EXPECT_EQ(good->task->resources.memory_mb, 64);
  const auto plugin = allocation_from_api(nlohmann::json::parse(
      R"({"Name": "csi", "Task": {"Command": "plugin", "User": "nobody", "CSIPlugin": {"ID": "p"}}})"));
  ASSERT_FALSE(plugin);
  EXPECT_NE(plugin.error().find("a CSI plugin task runs as root"), std::string::npos) << plugin.error();
  const auto negative = allocation_from_api(nlohmann::json::parse(
      R"({"Name": "web", "Task": {"Command": "true", "Resources": {"MemoryMB": -1}}})"));
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().find("MemoryMB"), std::string::npos) << negative.error();
}

}  // namespace
}  // namespace mooring::domain
