// Namespaces on the REST API, over real sockets: ids are unique per namespace, every read and
// write acts in the namespace the request names (?namespace=, a body's Namespace, or "default"),
// "*" lists every namespace the token may read, and a namespace-limited token sees and changes
// only its own — in lists, single reads, blocking queries and events.
#include <future>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/controlplane/support/acl_api_fixture.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;
using namespace std::chrono_literals;

using support::parse;
using support::volume_body;

namespace {

std::string volume_in(const std::string& ns, const std::string& id, const std::string& external) {
  json v = {{"ID", id},
            {"PluginID", "hostpath"},
            {"ExternalID", external},
            {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}};
  if (!ns.empty()) v["Namespace"] = ns;
  return json{{"Volumes", {v}}}.dump();
}

std::string allocation_of(const std::string& source) {
  return json{{"Allocation",
               {{"Name", "job"},
                {"Volumes",
                 {{"data", {{"Source", source}, {"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}}}}}
      .dump();
}

std::set<std::string> ids_of(const json& list) {
  std::set<std::string> out;
  for (const auto& item : list) out.insert(item.value("Namespace", "?") + "/" + item.value("ID", "?"));
  return out;
}

}  // namespace

class NamespaceApiTest : public support::AclApiFixture {
 protected:
  void SetUp() override {
    AclApiFixture::SetUp();
    mgmt = bootstrap();
    for (const auto* ns : {"team-a", "team-b", "ops"})  // a write lands only in a namespace that exists
      EXPECT_EQ(call("PUT", std::string("/v1/namespace/") + ns, "{}", mgmt).status, 200u);
  }
  std::string mgmt;
};

TEST_F(NamespaceApiTest, OneIdInTwoNamespacesIsTwoVolumes) {
  // The same id, once through the query and once through the body's Namespace.
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-1?namespace=team-a", volume_in("", "vol-1", "ext-a"), mgmt).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-2", volume_in("team-a", "vol-2", "ext-a2"), mgmt).status, 200u);
  EXPECT_EQ(parse(call("GET", "/v1/volume/csi/vol-1", "", mgmt))["ExternalID"], "ext-vol-1");
  auto a = parse(call("GET", "/v1/volume/csi/vol-1?namespace=team-a", "", mgmt));
  EXPECT_EQ(a["ExternalID"], "ext-a");
  EXPECT_EQ(a["Namespace"], "team-a");

  EXPECT_EQ(ids_of(parse(call("GET", "/v1/volumes", "", mgmt))), (std::set<std::string>{"default/vol-1"}));
  EXPECT_EQ(ids_of(parse(call("GET", "/v1/volumes?namespace=team-a", "", mgmt))),
            (std::set<std::string>{"team-a/vol-1", "team-a/vol-2"}));
  EXPECT_EQ(ids_of(parse(call("GET", "/v1/volumes?namespace=*&prefix=vol-1", "", mgmt))),
            (std::set<std::string>{"default/vol-1", "team-a/vol-1"}));

  // Deregistering one leaves the other.
  ASSERT_EQ(call("DELETE", "/v1/volume/csi/vol-1?namespace=team-a", "", mgmt).status, 200u);
  EXPECT_EQ(call("GET", "/v1/volume/csi/vol-1?namespace=team-a", "", mgmt).status, 404u);
  EXPECT_EQ(call("GET", "/v1/volume/csi/vol-1", "", mgmt).status, 200u);
  auto gone = call("GET", "/v1/volume/csi/vol-1?namespace=team-b", "", mgmt);
  EXPECT_EQ(parse(gone)["Error"], "volume not found in namespace \"team-b\": vol-1");
}

TEST_F(NamespaceApiTest, ANamespaceTheRequestCannotActInIs400AndChangesNothing) {
  const auto before = fingerprint();
  auto mismatch = call("PUT", "/v1/volume/csi/vol-9?namespace=team-a", volume_in("team-b", "vol-9", "x"), mgmt);
  EXPECT_EQ(mismatch.status, 400u);
  EXPECT_EQ(parse(mismatch)["Error"],
            "field \"Namespace\": \"team-b\" does not match the query parameter namespace=team-a");
  auto bad = call("GET", "/v1/volumes?namespace=team%20a", "", mgmt);
  EXPECT_EQ(bad.status, 400u);
  EXPECT_NE(bad.body.find("query parameter \\\"namespace\\\": invalid namespace"), std::string::npos) << bad.body;
  auto star = call("PUT", "/v1/volume/csi/vol-9?namespace=*", volume_body("vol-9"), mgmt);
  EXPECT_EQ(star.status, 400u);
  EXPECT_NE(star.body.find("lists every namespace"), std::string::npos) << star.body;
  EXPECT_EQ(call("GET", "/v1/volume/csi/vol-1?namespace=*", "", mgmt).status, 400u);
  const json two = {{"Volumes",
                     {{{"ID", "a"}, {"Namespace", "x"}, {"PluginID", "hostpath"}, {"ExternalID", "1"}},
                      {{"ID", "b"}, {"Namespace", "y"}, {"PluginID", "hostpath"}, {"ExternalID", "2"}}}}};
  auto split = call("PUT", "/v1/volumes", two.dump(), mgmt);
  EXPECT_EQ(split.status, 400u);
  EXPECT_NE(split.body.find("one request acts in one namespace"), std::string::npos) << split.body;
  EXPECT_EQ(fingerprint(), before);
}

TEST_F(NamespaceApiTest, AllocationsClaimVolumesOfTheirOwnNamespaceOnly) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/only-a?namespace=team-a", volume_in("", "only-a", "ext-only-a"), mgmt).status,
            200u);
  const auto before = fingerprint();
  auto elsewhere = call("POST", "/v1/allocations", allocation_of("only-a"), mgmt);
  EXPECT_EQ(elsewhere.status, 400u);
  EXPECT_NE(elsewhere.body.find("volume not found: only-a"), std::string::npos) << elsewhere.body;
  EXPECT_EQ(fingerprint(), before);

  auto placed = call("POST", "/v1/allocations?namespace=team-a", allocation_of("only-a"), mgmt);
  ASSERT_EQ(placed.status, 200u) << placed.body;
  const std::string id = parse(placed)["ID"];
  EXPECT_EQ(parse(call("GET", "/v1/allocation/" + id + "?namespace=team-a", "", mgmt))["Namespace"], "team-a");
  // Found only in its namespace, also for a stop.
  EXPECT_EQ(call("GET", "/v1/allocation/" + id, "", mgmt).status, 404u);
  EXPECT_EQ(call("POST", "/v1/allocation/" + id + "/stop", "", mgmt).status, 404u);
  EXPECT_TRUE(parse(call("GET", "/v1/allocations", "", mgmt)).empty());
  EXPECT_EQ(parse(call("GET", "/v1/allocations?namespace=*", "", mgmt)).size(), 1u);
  // Its events carry its namespace.
  auto events = parse(call("GET", "/v1/events?topic=Allocation&namespace=team-a", "", mgmt));
  ASSERT_FALSE(events.empty());
  for (const auto& e : events) EXPECT_EQ(e["Namespace"], "team-a") << e.dump();
  EXPECT_TRUE(parse(call("GET", "/v1/events?topic=Allocation", "", mgmt)).empty());
}

TEST_F(NamespaceApiTest, ANamespaceLimitedTokenSeesAndChangesOnlyItsNamespace) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/a-1?namespace=team-a", volume_in("", "a-1", "ext-a-1"), mgmt).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/b-1?namespace=team-b", volume_in("", "b-1", "ext-b-1"), mgmt).status, 200u);
  const auto team_a = token_with(mgmt, "team-a", {{"Namespace", {{"team-a", {{"Policy", "write"}}}}}});

  EXPECT_EQ(ids_of(parse(call("GET", "/v1/volumes?namespace=team-a", "", team_a))),
            (std::set<std::string>{"team-a/a-1"}));
  EXPECT_EQ(ids_of(parse(call("GET", "/v1/volumes?namespace=*", "", team_a))), (std::set<std::string>{"team-a/a-1"}));
  auto other = call("GET", "/v1/volumes?namespace=team-b", "", team_a);
  EXPECT_EQ(other.status, 403u);
  EXPECT_EQ(parse(other)["Error"],
            "permission denied: token \"team-a-token\" lacks csi-list-volume in namespace \"team-b\"");
  EXPECT_EQ(call("GET", "/v1/volume/csi/b-1?namespace=team-b", "", team_a).status, 403u);
  EXPECT_EQ(call("GET", "/v1/volume/csi/vol-1", "", team_a).status, 403u);  // "default" is not its either

  const auto before = fingerprint();
  EXPECT_EQ(call("PUT", "/v1/volume/csi/b-2?namespace=team-b", volume_in("", "b-2", "x"), team_a).status, 403u);
  EXPECT_EQ(call("PUT", "/v1/volume/csi/b-2", volume_in("team-b", "b-2", "x"), team_a).status, 403u);
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/b-1?namespace=team-b", "", team_a).status, 403u);
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(call("PUT", "/v1/volume/csi/a-2?namespace=team-a", volume_in("", "a-2", "ext-a-2"), team_a).status, 200u);

  // Events: only team-a's (and no node or plugin events: the token has no Node or Plugin rule).
  auto events = parse(call("GET", "/v1/events?namespace=*", "", team_a));
  ASSERT_FALSE(events.empty());
  for (const auto& e : events) EXPECT_EQ(e["Namespace"], "team-a") << e.dump();

  // A blocking query over every namespace wakes for team-b's write but shows team-a's only.
  auto first = call("GET", "/v1/volumes?namespace=*", "", team_a);
  const auto index = first.header("x-mooring-index");
  auto waiter = std::async(std::launch::async, [&] {
    return call("GET", "/v1/volumes?namespace=*&index=" + index + "&wait=30s", "", team_a);
  });
  while (server.on_io([this] { return server.store.waiter_count(); }) == 0) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/b-3?namespace=team-b", volume_in("", "b-3", "ext-b-3"), mgmt).status, 200u);
  auto woke = waiter.get();
  ASSERT_EQ(woke.status, 200u) << woke.body;
  EXPECT_EQ(ids_of(parse(woke)), (std::set<std::string>{"team-a/a-1", "team-a/a-2"}));
  EXPECT_GT(std::stoull(woke.header("x-mooring-index")), std::stoull(index));
}

TEST_F(NamespaceApiTest, AGlobRuleGrantsEveryMatchingNamespace) {
  ASSERT_EQ(call("PUT", "/v1/volume/csi/a-1?namespace=team-a", volume_in("", "a-1", "ext-a-1"), mgmt).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/o-1?namespace=ops", volume_in("", "o-1", "ext-o-1"), mgmt).status, 200u);
  const auto teams = token_with(mgmt, "teams", {{"Namespace", {{"team-*", {{"Policy", "read"}}}}}});
  EXPECT_EQ(ids_of(parse(call("GET", "/v1/volumes?namespace=*", "", teams))), (std::set<std::string>{"team-a/a-1"}));
  EXPECT_EQ(call("GET", "/v1/volumes?namespace=team-zzz", "", teams).status, 200u);
  EXPECT_EQ(call("GET", "/v1/volumes?namespace=ops", "", teams).status, 403u);
  const auto nothing = token_with(mgmt, "nodes", {{"Node", "read"}});
  auto none = call("GET", "/v1/volumes?namespace=*", "", nothing);
  EXPECT_EQ(none.status, 403u);
  EXPECT_EQ(parse(none)["Error"], "permission denied: token \"nodes-token\" lacks csi-list-volume in any namespace");
}

}  // namespace mooring::controlplane
