// Who may see and use the objects a plugin holds (acl/plugin_objects.hpp): a namespace token
// lists and uses only its namespaces' objects, an owner-less object is the cluster's
// (operator:write), and the whole listing takes plugin:read with operator:read.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "services/controlplane/acl/plugin_objects.hpp"
#include "services/controlplane/acl/policy.hpp"

namespace mooring::controlplane::acl {

namespace {

using json = nlohmann::json;

Acl acl_of(const json& rules) {
  auto p = parse_policy(json{{"Name", "p"}, {"Rules", rules}}, "p");
  if (!p) throw std::runtime_error(p.error());
  return Acl::from_policies({&*p});
}

const Owner kTeamA = "team-a", kTeamB = "team-b", kNobody = std::nullopt;

}  // namespace

TEST(PluginObjects, ANamespaceTokenListsItsNamespacesObjectsOnly) {
  const auto team = acl_of({{"Namespace", {{"team-a", {{"Policy", "write"}}}, {"team-c", {{"Policy", "read"}}}}}});
  EXPECT_FALSE(sees_whole_listing(team));
  EXPECT_TRUE(lists(team, kTeamA, "team-a"));
  EXPECT_FALSE(lists(team, kTeamB, "team-a"));
  EXPECT_FALSE(lists(team, kNobody, "team-a"));
  // A namespace asked narrows the listing even to one the token may also read.
  EXPECT_FALSE(lists(team, Owner("team-c"), "team-a"));
  // "*": every namespace it may list, and still nothing nobody owns.
  EXPECT_TRUE(lists(team, kTeamA, "*"));
  EXPECT_TRUE(lists(team, Owner("team-c"), "*"));
  EXPECT_FALSE(lists(team, kTeamB, "*"));
  EXPECT_FALSE(lists(team, kNobody, "*"));
}

TEST(PluginObjects, TheWholeListingTakesPluginReadAndOperatorReadTogether) {
  EXPECT_TRUE(sees_whole_listing(Acl::management()));
  const auto ops = acl_of({{"Plugin", "read"}, {"Operator", "read"}});
  EXPECT_TRUE(sees_whole_listing(ops));
  EXPECT_TRUE(lists(ops, kTeamB, "default"));
  EXPECT_TRUE(lists(ops, kNobody, "default"));
  EXPECT_FALSE(sees_whole_listing(acl_of({{"Plugin", "read"}})));
  EXPECT_FALSE(sees_whole_listing(acl_of({{"Operator", "write"}})));
  EXPECT_FALSE(sees_whole_listing(acl_of({{"Plugin", "read"}, {"Operator", "deny"}})));
}

TEST(PluginObjects, AGroupIsListedWhenEveryMemberIsAndAMemberlessOneOnlyWhole) {
  const auto team = acl_of({{"Namespace", {{"team-a", {{"Policy", "read"}}}}}});
  EXPECT_TRUE(lists_all(team, {kTeamA, kTeamA}, "team-a"));
  EXPECT_FALSE(lists_all(team, {kTeamA, kTeamB}, "team-a"));
  EXPECT_FALSE(lists_all(team, {}, "team-a"));
  EXPECT_TRUE(lists_all(Acl::management(), {}, "team-a"));
}

TEST(PluginObjects, UsingAnObjectTakesTheRightInItsOwnersNamespaceOrOperatorWriteForNobodys) {
  const auto reader = acl_of({{"Namespace", {{"team-a", {{"Policy", "read"}}}}}});
  EXPECT_TRUE(may_use(reader, Use::read, {kTeamA}));
  EXPECT_FALSE(may_use(reader, Use::write, {kTeamA}));  // deleting needs csi-write-volume
  EXPECT_FALSE(may_use(reader, Use::read, {kTeamB}));
  EXPECT_FALSE(may_use(reader, Use::read, {kNobody}));
  EXPECT_FALSE(may_use(reader, Use::read, {}));
  const auto writer = acl_of({{"Namespace", {{"team-a", {{"Policy", "write"}}}}}});
  EXPECT_TRUE(may_use(writer, Use::write, {kTeamA, kTeamA}));
  EXPECT_FALSE(may_use(writer, Use::write, {kTeamA, kTeamB}));  // every member of a group
  // operator:write covers what nobody owns, not another namespace's.
  const auto op = acl_of({{"Operator", "write"}});
  EXPECT_TRUE(may_use(op, Use::read, {kNobody}));
  EXPECT_TRUE(may_use(op, Use::write, {}));
  EXPECT_FALSE(may_use(op, Use::read, {kTeamB}));
  EXPECT_FALSE(may_use(acl_of({{"Operator", "read"}}), Use::read, {kNobody}));
  EXPECT_TRUE(may_use(Acl::management(), Use::write, {kTeamB, kNobody}));
}

TEST(PluginObjects, TheRefusalNamesTheRightsAndNothingOfTheObject) {
  EXPECT_NE(use_need(Use::read).find("csi-read-volume"), std::string::npos);
  EXPECT_NE(use_need(Use::write).find("csi-write-volume"), std::string::npos);
  EXPECT_NE(use_need(Use::read).find("operator:write"), std::string::npos);
}

}  // namespace mooring::controlplane::acl
