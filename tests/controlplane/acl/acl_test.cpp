// The ACL room's pure rules: policy validation naming the field, glob precedence, deny wins,
// read/write expansion, top-level areas, tokens and their secrets.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "services/controlplane/acl/acl.hpp"
#include "services/controlplane/acl/policy.hpp"
#include "services/controlplane/acl/secret.hpp"
#include "services/controlplane/acl/token.hpp"

namespace mooring::controlplane::acl {

using json = nlohmann::json;

namespace {

Policy policy(const std::string& name, const json& rules) {
  auto p = parse_policy(json{{"Name", name}, {"Rules", rules}}, name);
  if (!p) throw std::runtime_error(p.error());
  return *p;
}

Acl acl_of(std::initializer_list<const Policy*> ps) { return Acl::from_policies(std::vector<const Policy*>(ps)); }

}  // namespace

TEST(AclGlob, StarMatchesAnyRunIncludingNone) {
  EXPECT_TRUE(glob_match("*", "default"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("team-*", "team-a"));
  EXPECT_TRUE(glob_match("team-*", "team-"));
  EXPECT_TRUE(glob_match("*-a", "team-a"));
  EXPECT_TRUE(glob_match("t*m-*", "team-b"));
  EXPECT_FALSE(glob_match("team-*", "other"));
  EXPECT_FALSE(glob_match("team", "team-a"));
  EXPECT_TRUE(glob_match("default", "default"));
}

TEST(AclPolicy, TheDocumentedShapeParsesAndRoundTrips) {
  const auto body = json::parse(R"({"Name":"reader","Description":"read all","Rules":{"Namespace":{"*":{"Policy":"read"},
      "team-a":{"Capabilities":["csi-write-volume","submit-alloc"]}},"Plugin":"read","Node":"read","Operator":"read"}})");
  auto p = parse_policy(body, "reader");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->description, "read all");
  ASSERT_EQ(p->namespaces.size(), 2u);
  EXPECT_EQ(p->namespaces.at("*").policy, "read");
  EXPECT_EQ(p->namespaces.at("team-a").capabilities,
            (std::set<Capability>{Capability::csi_write_volume, Capability::submit_alloc}));
  auto again = policy_from_storage(to_json(*p));
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(*again, *p);
}

TEST(AclPolicy, ValidationErrorsNameThePolicyAndTheField) {
  auto bad = [](const std::string& rules) {
    auto p = parse_policy(json{{"Rules", json::parse(rules)}}, "ops");
    return p ? std::string("(accepted)") : p.error();
  };
  EXPECT_NE(bad(R"({"Namespace":{"*":{"Policy":"admin"}}})").find("policy \"ops\": Rules.Namespace.\"*\".Policy"),
            std::string::npos);
  EXPECT_NE(bad(R"({"Namespace":{"a":{"Capabilities":["csi-fly"]}}})").find("Rules.Namespace.\"a\".Capabilities"),
            std::string::npos);
  EXPECT_NE(bad(R"({"Namespace":{"a":{"Polciy":"deny"}}})").find("unknown field \"Polciy\""), std::string::npos);
  EXPECT_NE(bad(R"({"Plugin":"admin"})").find("policy \"ops\": Rules.Plugin"), std::string::npos);
  EXPECT_NE(bad(R"({"Node":"list"})").find("Rules.Node"), std::string::npos);
  EXPECT_NE(bad(R"({"Operator":true})").find("Rules.Operator"), std::string::npos);
  EXPECT_NE(bad(R"({"Nodes":"read"})").find("unknown field \"Nodes\""), std::string::npos);
  EXPECT_FALSE(parse_policy(json{{"Rules", json::object()}}, "bad name"));
  auto mismatch = parse_policy(json{{"Name", "other"}, {"Rules", json::object()}}, "ops");
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().find("Name"), std::string::npos);
}

TEST(AclRules, ReadExpandsToListAndReadCapsWriteToAll) {
  auto reader = policy("r", {{"Namespace", {{"default", {{"Policy", "read"}}}}}});
  auto writer = policy("w", {{"Namespace", {{"default", {{"Policy", "write"}}}}}});
  auto r = acl_of({&reader});
  EXPECT_TRUE(r.allows(Capability::csi_list_volume, "default"));
  EXPECT_TRUE(r.allows(Capability::csi_read_volume, "default"));
  EXPECT_TRUE(r.allows(Capability::list_allocs, "default"));
  EXPECT_TRUE(r.allows(Capability::read_alloc, "default"));
  EXPECT_FALSE(r.allows(Capability::csi_write_volume, "default"));
  EXPECT_FALSE(r.allows(Capability::submit_alloc, "default"));
  EXPECT_FALSE(r.allows(Capability::csi_read_volume, "other"));
  auto w = acl_of({&writer});
  for (auto c : kAllCapabilities) EXPECT_TRUE(w.allows(c, "default")) << to_string(c);
}

TEST(AclRules, ExactNameBeatsGlobAndTheClosestGlobWins) {
  auto p = policy("p", {{"Namespace",
                         {{"*", {{"Policy", "write"}}},
                          {"team-*", {{"Policy", "read"}}},
                          {"team-a", {{"Capabilities", {"submit-alloc"}}}}}}});
  auto a = acl_of({&p});
  // exact: only what team-a lists (the broader globs do not add to it)
  EXPECT_TRUE(a.allows(Capability::submit_alloc, "team-a"));
  EXPECT_FALSE(a.allows(Capability::csi_read_volume, "team-a"));
  // team-* is closer than *
  EXPECT_TRUE(a.allows(Capability::csi_read_volume, "team-b"));
  EXPECT_FALSE(a.allows(Capability::csi_write_volume, "team-b"));
  // only * matches
  EXPECT_TRUE(a.allows(Capability::csi_write_volume, "default"));
}

TEST(AclRules, DenyWinsOverEveryOtherPolicyForTheSameMatch) {
  auto writer = policy("w", {{"Namespace", {{"default", {{"Policy", "write"}}}}}, {"Node", "write"}});
  auto denier = policy("d", {{"Namespace", {{"default", {{"Policy", "deny"}}}}}, {"Node", "deny"}});
  auto a = acl_of({&writer, &denier});
  for (auto c : kAllCapabilities) EXPECT_FALSE(a.allows(c, "default")) << to_string(c);
  EXPECT_EQ(a.level(Area::node), Level::none);
  // Equally close globs merge, deny included.
  auto g1 = policy("g1", {{"Namespace", {{"tea*", {{"Policy", "write"}}}}}});
  auto g2 = policy("g2", {{"Namespace", {{"*m-a", {{"Policy", "deny"}}}}}});
  EXPECT_FALSE(acl_of({&g1, &g2}).allows(Capability::csi_read_volume, "team-a"));
  EXPECT_TRUE(acl_of({&g1, &g2}).allows(Capability::csi_read_volume, "team-b"));
}

TEST(AclRules, CapabilitiesOfSeveralPoliciesAddUp) {
  auto a1 = policy("a1", {{"Namespace", {{"default", {{"Capabilities", {"csi-read-volume"}}}}}}});
  auto a2 = policy("a2", {{"Namespace", {{"default", {{"Capabilities", {"submit-alloc"}}}}}}});
  auto a = acl_of({&a1, &a2});
  EXPECT_TRUE(a.allows(Capability::csi_read_volume, "default"));
  EXPECT_TRUE(a.allows(Capability::submit_alloc, "default"));
  EXPECT_FALSE(a.allows(Capability::csi_list_volume, "default"));
}

TEST(AclRules, AreasTakeTheHighestLevelAndReadImpliesList) {
  auto l = policy("l", {{"Plugin", "list"}, {"Operator", "read"}});
  auto r = policy("r", {{"Plugin", "read"}});
  auto a = acl_of({&l});
  EXPECT_FALSE(a.missing(Need::on(Area::plugin, Level::list), "default"));
  EXPECT_EQ(a.missing(Need::on(Area::plugin, Level::read), "default"), "plugin:read");
  EXPECT_EQ(a.missing(Need::on(Area::operator_, Level::write), "default"), "operator:write");
  EXPECT_EQ(a.missing(Need::on(Area::node, Level::read), "default"), "node:read");
  auto both = acl_of({&l, &r});
  EXPECT_FALSE(both.missing(Need::on(Area::plugin, Level::read), "default"));
}

// Deploying a plugin (a Task.CSIPlugin) needs plugin:write: a plugin serves every namespace.
// Write implies read and list; a deny anywhere wins.
TEST(AclRules, PluginWriteIsAGrantableLevelAboveReadAndADenyWins) {
  auto w = policy("w", {{"Plugin", "write"}});
  auto r = policy("r", {{"Plugin", "read"}});
  auto d = policy("d", {{"Plugin", "deny"}});
  EXPECT_FALSE(acl_of({&w}).missing(Need::on(Area::plugin, Level::write), "default"));
  EXPECT_FALSE(acl_of({&w}).missing(Need::on(Area::plugin, Level::list), "default"));
  EXPECT_EQ(acl_of({&r}).missing(Need::on(Area::plugin, Level::write), "default"), "plugin:write");
  EXPECT_EQ(acl_of({&w, &d}).missing(Need::on(Area::plugin, Level::write), "default"), "plugin:write");
  EXPECT_FALSE(Acl::management().missing(Need::on(Area::plugin, Level::write), "default"));
  // Write on every namespace is not write on plugins.
  auto ns = policy("ns", {{"Namespace", {{"*", {{"Policy", "write"}}}}}});
  EXPECT_EQ(acl_of({&ns}).missing(Need::on(Area::plugin, Level::write), "default"), "plugin:write");
  EXPECT_EQ(to_json(w)["Rules"]["Plugin"], "write");
}

TEST(AclRules, ManagementMayDoEverythingAndNoPolicyNothing) {
  auto m = Acl::management();
  EXPECT_FALSE(m.missing(Need::management(), "x"));
  EXPECT_FALSE(m.missing(Need::cap(Capability::alloc_lifecycle), "any"));
  EXPECT_FALSE(m.missing(Need::on(Area::operator_, Level::write), "any"));
  auto none = acl_of({});
  EXPECT_EQ(none.missing(Need::management(), "default"), "management");
  EXPECT_EQ(none.missing(Need::cap(Capability::csi_write_volume), "default"), "csi-write-volume");
  EXPECT_FALSE(none.missing(Need::filtered(), "default"));
  EXPECT_FALSE(none.missing(Need::anyone(), "default"));
}

TEST(AclToken, RequestValidationAndExpiry) {
  const auto now = domain::from_unix_ms(1'000'000);
  auto t = parse_token_request(json{{"Name", "ro"}, {"Type", "client"}, {"Policies", {"reader"}}, {"ExpirationTTL", "1h"}},
                               now);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->expiration_time, now + std::chrono::hours(1));
  EXPECT_FALSE(expired(*t, now));
  EXPECT_TRUE(expired(*t, now + std::chrono::hours(1)));
  EXPECT_FALSE(parse_token_request(json{{"Name", "x"}, {"Type", "client"}}, now));  // no policy
  EXPECT_FALSE(parse_token_request(json{{"Type", "management"}, {"Policies", {"reader"}}}, now));
  EXPECT_FALSE(parse_token_request(json{{"Type", "root"}, {"Policies", {"reader"}}}, now));
  auto bad_ttl = parse_token_request(json{{"Name", "x"}, {"Policies", {"r"}}, {"ExpirationTTL", "-1s"}}, now);
  ASSERT_FALSE(bad_ttl);
  EXPECT_NE(bad_ttl.error().find("ExpirationTTL"), std::string::npos);
}

TEST(AclToken, ApiJsonNeverCarriesTheSecretUnlessGivenAndStorageOnlyItsHash) {
  Token t;
  t.accessor_id = random_uuid();
  const auto secret = random_uuid();
  t.secret_hash = secret_hash(secret);
  t.name = "n";
  t.policies = {"reader"};
  EXPECT_FALSE(to_api_json(t).contains("SecretID"));
  EXPECT_EQ(to_api_json(t, secret)["SecretID"], secret);
  const auto stored = to_storage_text(t);
  EXPECT_EQ(stored.find(secret), std::string::npos);
  EXPECT_EQ(stored.find("SecretID"), std::string::npos);
  auto back = token_from_storage(json::parse(stored));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, t);
}

TEST(AclSecret, UuidsAreRandomVersion4AndTheHashIsSha256) {
  const auto a = random_uuid(), b = random_uuid();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 36u);
  EXPECT_EQ(a[14], '4');
  EXPECT_EQ(secret_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace mooring::controlplane::acl
