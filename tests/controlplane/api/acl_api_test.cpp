// ACLs on the REST API, over real sockets: every route declares its need, bootstrap works once,
// 401/403 change nothing, blocking queries re-check the token, events are filtered, and a SecretID
// is answered once and stored nowhere.
#include <future>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/controlplane/support/acl_api_fixture.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;
using namespace std::chrono_literals;

using support::parse;
using support::volume_body;
using AclApiTest = support::AclApiFixture;

TEST(AclRouteTable, EveryRouteDeclaresWhatItNeeds) {
  const auto routes = api::Api::route_table();
  ASSERT_GT(routes.size(), 30u);
  for (const auto& r : routes) {
    EXPECT_NE(r.need.kind, acl::Need::Kind::unset) << r.method << " " << r.pattern;
    // Only health, readiness, bootstrap, the dashboard's static files and the API's contract are
    // open to anyone, and node enrollment, whose endpoint checks its own credential (an
    // introduction token, or a management token: EnrollmentApiTest).
    if (r.need.kind == acl::Need::Kind::anyone) {
      EXPECT_TRUE(r.pattern == "/v1/status/health" || r.pattern == "/v1/status/ready" || r.pattern == "/v1/acl/bootstrap" ||
                  r.pattern == "/" || r.pattern == "/ui" || r.pattern == "/ui/:file" || r.pattern == "/v1/node/:id/enroll" ||
                  r.pattern == "/v1/openapi.json")
          << r.method << " " << r.pattern;
    }
    // A write never needs only a read.
    if (r.method != "GET" && r.need.kind == acl::Need::Kind::capability) {
      EXPECT_TRUE(r.need.capability != acl::Capability::csi_list_volume &&
                  r.need.capability != acl::Capability::csi_read_volume &&
                  r.need.capability != acl::Capability::list_allocs && r.need.capability != acl::Capability::read_alloc)
          << r.method << " " << r.pattern;
    }
  }
}

TEST_F(AclApiTest, BootstrapOnceThenTheTokenManagesAndSeesItself) {
  EXPECT_EQ(call("GET", "/v1/volumes").status, 401u);  // before bootstrap too
  auto first = call("POST", "/v1/acl/bootstrap");
  ASSERT_EQ(first.status, 200u) << first.body;
  auto body = parse(first);
  EXPECT_EQ(body["Type"], "management");
  const std::string secret = body["SecretID"];
  ASSERT_EQ(secret.size(), 36u);
  auto again = call("POST", "/v1/acl/bootstrap");
  EXPECT_EQ(again.status, 400u);
  EXPECT_NE(again.body.find("already done"), std::string::npos);

  auto self = call("GET", "/v1/acl/token/self", "", secret);
  ASSERT_EQ(self.status, 200u) << self.body;
  EXPECT_EQ(parse(self)["AccessorID"], body["AccessorID"]);
  EXPECT_EQ(self.body.find(secret), std::string::npos);
  auto list = call("GET", "/v1/acl/tokens", "", secret);
  ASSERT_EQ(list.status, 200u);
  EXPECT_EQ(list.body.find(secret), std::string::npos);
  EXPECT_EQ(call("GET", "/v1/volumes", "", secret).status, 200u);
  // Bearer and X-Nomad-Token work too.
  EXPECT_EQ(http_request(port, "GET", "/v1/volumes", {}, {{"Authorization", "Bearer " + secret}}).status, 200u);
  EXPECT_EQ(http_request(port, "GET", "/v1/volumes", {}, {{"X-Nomad-Token", secret}}).status, 200u);
  // Only the hash is stored.
  server.settle();
  for (const auto& tx : server.backend.transactions)
    for (const auto& m : tx.mutations) EXPECT_EQ(m.value.value_or("").find(secret), std::string::npos);
}

TEST_F(AclApiTest, AReadOnlyTokenReadsButEveryWriteIs403AndChangesNothing) {
  const auto mgmt = bootstrap();
  const auto reader = token_with(mgmt, "reader",
                                 {{"Namespace", {{"*", {{"Policy", "read"}}}}}, {"Plugin", "read"}, {"Node", "read"},
                                  {"Operator", "read"}});
  EXPECT_EQ(call("GET", "/v1/volumes", "", reader).status, 200u);
  EXPECT_EQ(call("GET", "/v1/volume/csi/vol-1", "", reader).status, 200u);
  EXPECT_EQ(call("GET", "/v1/nodes", "", reader).status, 200u);
  EXPECT_EQ(call("GET", "/v1/plugins", "", reader).status, 200u);
  EXPECT_EQ(call("GET", "/v1/allocations", "", reader).status, 200u);
  const auto before = fingerprint();
  auto put = call("PUT", "/v1/volume/csi/vol-2", volume_body("vol-2"), reader);
  EXPECT_EQ(put.status, 403u);
  EXPECT_EQ(parse(put)["Error"], "permission denied: token \"reader-token\" lacks csi-write-volume in namespace \"default\"");
  auto purge = call("DELETE", "/v1/node/node-1", "", reader);
  EXPECT_EQ(purge.status, 403u);
  EXPECT_NE(purge.body.find("lacks node:write"), std::string::npos);
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1/detach?node=node-1", "", reader).status, 403u);
  EXPECT_EQ(call("POST", "/v1/allocations", "{}", reader).status, 403u);
  EXPECT_EQ(call("PUT", "/v1/acl/token", R"({"Type":"management"})", reader).status, 403u);
  EXPECT_EQ(call("GET", "/v1/acl/tokens", "", reader).status, 403u);
  EXPECT_EQ(fingerprint(), before);
}

TEST_F(AclApiTest, ForceAndPurgeNeedOperatorWriteBesidesCsiWriteVolume) {
  const auto mgmt = bootstrap();
  const auto writer = token_with(mgmt, "writer", {{"Namespace", {{"default", {{"Policy", "write"}}}}}});
  const auto before = fingerprint();
  // Every spelling the endpoint reads as true ("1" and a bare flag slipped past before).
  for (const auto* query : {"?force=true", "?force=1", "?force", "?purge=true", "?purge=1", "?purge"}) {
    auto r = call("DELETE", std::string("/v1/volume/csi/vol-1") + query, "", writer);
    EXPECT_EQ(r.status, 403u) << query << " " << r.body;
    EXPECT_NE(r.body.find("lacks operator:write"), std::string::npos) << query;
  }
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(call("DELETE", "/v1/volume/csi/vol-1", "", writer).status, 200u);
}

TEST_F(AclApiTest, SubmittingAnAllocationThatMountsVolumesNeedsCsiMountVolume) {
  const auto mgmt = bootstrap();
  const auto submitter = token_with(mgmt, "submit", {{"Namespace", {{"default", {{"Capabilities", {"submit-alloc"}}}}}}});
  const json with_volume = {{"Allocation",
                             {{"Name", "job"},
                              {"Volumes",
                               {{"data",
                                 {{"Source", "vol-1"},
                                  {"AccessMode", "single-node-writer"},
                                  {"AttachmentMode", "file-system"}}}}}}}};
  const auto before = fingerprint();
  auto r = call("POST", "/v1/allocations", with_volume.dump(), submitter);
  EXPECT_EQ(r.status, 403u);
  EXPECT_NE(r.body.find("lacks csi-mount-volume in namespace"), std::string::npos) << r.body;
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(call("POST", "/v1/allocations", json{{"Allocation", {{"Name", "plain"}}}}.dump(), submitter).status, 200u);
  const auto mounter = token_with(mgmt, "mount",
                                  {{"Namespace", {{"default", {{"Capabilities", {"submit-alloc", "csi-mount-volume"}}}}}}});
  EXPECT_EQ(call("POST", "/v1/allocations", with_volume.dump(), mounter).status, 200u);
}

// Issue 40: a plugin instance serves every namespace and receives their secrets, so running one
// is a cluster right. A namespace token (even with write on its namespace) cannot submit, update
// or stop a plugin allocation: 403 naming plugin:write, nothing changed.
TEST_F(AclApiTest, DeployingUpdatingOrStoppingAPluginAllocationNeedsPluginWrite) {
  const auto mgmt = bootstrap();
  const auto team = token_with(mgmt, "team", {{"Namespace", {{"default", {{"Policy", "write"}}}}}});
  const json task = {{"Command", "/bin/true"}, {"CSIPlugin", {{"ID", "hostpath"}, {"Type", "monolith"}}}};
  const std::string want =
      "permission denied: token \"team-token\" lacks plugin:write (Task.CSIPlugin runs a plugin that serves every "
      "namespace)";
  const auto before = fingerprint();
  for (const auto& body : {json{{"Allocation", {{"Name", "rogue"}, {"Task", task}}}},
                           json{{"Allocation", {{"Name", "rogue-everywhere"}, {"System", true}, {"Task", task}}}},
                           // Told about the right before the malformed field.
                           json{{"Allocation", {{"Name", "rogue"}, {"Task", {{"Command", "/bin/true"}, {"CSIPlugin", {{"ID", 5}}}}}}}}}) {
    auto r = call("POST", "/v1/allocations", body.dump(), team);
    EXPECT_EQ(r.status, 403u) << body.dump() << " " << r.body;
    EXPECT_EQ(parse(r)["Error"], want) << body.dump();
  }
  EXPECT_EQ(fingerprint(), before);
  // The same token runs a task that is no plugin.
  EXPECT_EQ(call("POST", "/v1/allocations", json{{"Allocation", {{"Name", "job"}, {"Task", {{"Command", "/bin/true"}}}}}}.dump(), team)
                .status,
            200u);

  const auto deployer = token_with(mgmt, "deployer", {{"Namespace", {{"default", {{"Policy", "write"}}}}}, {"Plugin", "write"}});
  auto ok = call("POST", "/v1/allocations", json{{"Allocation", {{"Name", "hostpath-plugin"}, {"Task", task}}}}.dump(), deployer);
  ASSERT_EQ(ok.status, 200u) << ok.body;
  const std::string id = parse(ok)["ID"];

  const auto placed = fingerprint();
  auto update = call("PUT", "/v1/allocation/" + id, json{{"Task", task}}.dump(), team);
  EXPECT_EQ(update.status, 403u) << update.body;
  EXPECT_EQ(parse(update)["Error"], want);
  // A body without CSIPlugin still names a plugin allocation: refused for the right, not the field.
  auto bare = call("PUT", "/v1/allocation/" + id, json{{"Task", {{"Command", "/bin/true"}}}}.dump(), team);
  EXPECT_EQ(bare.status, 403u) << bare.body;
  EXPECT_EQ(parse(bare)["Error"], want);
  auto stop = call("POST", "/v1/allocation/" + id + "/stop", "", team);
  EXPECT_EQ(stop.status, 403u) << stop.body;
  EXPECT_EQ(parse(stop)["Error"],
            "permission denied: token \"team-token\" lacks plugin:write (it runs a plugin that serves every namespace)");
  EXPECT_EQ(fingerprint(), placed);
  EXPECT_EQ(call("POST", "/v1/allocation/" + id + "/stop", "", deployer).status, 200u);
}

TEST_F(AclApiTest, UnknownExpiredAndDeletedTokensAre401) {
  const auto mgmt = bootstrap();
  EXPECT_EQ(call("GET", "/v1/volumes", "", "not-a-token").status, 401u);
  auto p = call("PUT", "/v1/acl/policy/reader", R"({"Rules":{"Namespace":{"*":{"Policy":"read"}}}})", mgmt);
  ASSERT_EQ(p.status, 200u) << p.body;
  auto t = parse(call("PUT", "/v1/acl/token", R"({"Name":"short","Policies":["reader"],"ExpirationTTL":"1s"})", mgmt));
  const std::string secret = t["SecretID"];
  EXPECT_EQ(call("GET", "/v1/volumes", "", secret).status, 200u);
  std::this_thread::sleep_for(1100ms);
  auto expired = call("GET", "/v1/volumes", "", secret);
  EXPECT_EQ(expired.status, 401u);
  EXPECT_NE(expired.body.find("expired"), std::string::npos);

  auto t2 = parse(call("PUT", "/v1/acl/token", R"({"Name":"gone","Policies":["reader"]})", mgmt));
  ASSERT_EQ(call("DELETE", "/v1/acl/token/" + t2["AccessorID"].get<std::string>(), "", mgmt).status, 200u);
  EXPECT_EQ(call("GET", "/v1/volumes", "", t2["SecretID"]).status, 401u);
}

TEST_F(AclApiTest, PolicyValidationIs400NamingTheFieldAndChangesNothing) {
  const auto mgmt = bootstrap();
  const auto before = fingerprint();
  auto r = call("PUT", "/v1/acl/policy/bad", R"({"Rules":{"Namespace":{"*":{"Policy":"admin"}}}})", mgmt);
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("policy \\\"bad\\\": Rules.Namespace.\\\"*\\\".Policy"), std::string::npos) << r.body;
  auto t = call("PUT", "/v1/acl/token", R"({"Name":"x","Policies":["nope"]})", mgmt);
  EXPECT_EQ(t.status, 400u);
  EXPECT_NE(t.body.find("no such policy"), std::string::npos);
  EXPECT_EQ(fingerprint(), before);
  auto list = parse(call("GET", "/v1/acl/policies", "", mgmt));
  EXPECT_TRUE(list.empty());
}

TEST_F(AclApiTest, AnonymousPolicyAppliesWithoutAToken) {
  const auto mgmt = bootstrap();
  EXPECT_EQ(call("GET", "/v1/volumes").status, 401u);
  ASSERT_EQ(call("PUT", "/v1/acl/policy/anonymous", R"({"Rules":{"Namespace":{"default":{"Policy":"read"}}}})", mgmt).status,
            200u);
  EXPECT_EQ(call("GET", "/v1/volumes").status, 200u);
  EXPECT_EQ(call("PUT", "/v1/volume/csi/vol-2", volume_body("vol-2")).status, 401u);
  EXPECT_EQ(call("GET", "/v1/acl/token/self").status, 401u);
}

TEST_F(AclApiTest, EventsShowOnlyTopicsTheTokenMayRead) {
  const auto mgmt = bootstrap();
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-2", volume_body("vol-2"), mgmt).status, 200u);
  const auto nodes_only = token_with(mgmt, "nodes", {{"Node", "read"}});
  auto all = parse(call("GET", "/v1/events", "", mgmt));
  ASSERT_FALSE(all.empty());
  auto some = call("GET", "/v1/events", "", nodes_only);
  ASSERT_EQ(some.status, 200u) << some.body;
  for (const auto& e : parse(some)) EXPECT_EQ(e["Topic"], "Node") << e.dump();
  auto vol_events = parse(call("GET", "/v1/events?topic=Volume", "", nodes_only));
  EXPECT_TRUE(vol_events.empty());
}

TEST_F(AclApiTest, ABlockingQueryRechecksTheTokenWhenItWakes) {
  const auto mgmt = bootstrap();
  auto created = parse(call("PUT", "/v1/acl/token", R"({"Name":"m2","Type":"management"})", mgmt));
  const std::string secret = created["SecretID"];
  auto first = call("GET", "/v1/volumes", "", secret);
  ASSERT_EQ(first.status, 200u);
  const auto index = first.header("x-mooring-index");
  auto waiter = std::async(std::launch::async,
                           [&] { return call("GET", "/v1/volumes?index=" + index + "&wait=30s", "", secret); });
  while (server.on_io([this] { return server.store.waiter_count(); }) == 0) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(call("DELETE", "/v1/acl/token/" + created["AccessorID"].get<std::string>(), "", mgmt).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volume/csi/vol-2", volume_body("vol-2"), mgmt).status, 200u);
  EXPECT_EQ(waiter.get().status, 401u);
}

TEST_F(AclApiTest, ASecretIsNeverKeptForAnIdempotencyKeyReplay) {
  const auto mgmt = bootstrap();
  ASSERT_EQ(call("PUT", "/v1/acl/policy/reader", R"({"Rules":{"Namespace":{"*":{"Policy":"read"}}}})", mgmt).status, 200u);
  const std::map<std::string, std::string> headers{{"X-Mooring-Token", mgmt}, {"Idempotency-Key", "k-1"}};
  auto a = http_request(port, "PUT", "/v1/acl/token", R"({"Name":"a","Policies":["reader"]})", headers);
  auto b = http_request(port, "PUT", "/v1/acl/token", R"({"Name":"a","Policies":["reader"]})", headers);
  ASSERT_EQ(a.status, 200u);
  ASSERT_EQ(b.status, 200u);
  EXPECT_TRUE(b.header("idempotent-replayed").empty());
  EXPECT_NE(parse(a)["SecretID"], parse(b)["SecretID"]);
  server.settle();
  for (const auto& tx : server.backend.transactions)
    for (const auto& m : tx.mutations) {
      EXPECT_EQ(m.value.value_or("").find(parse(a)["SecretID"].get<std::string>()), std::string::npos);
      EXPECT_EQ(m.value.value_or("").find(mgmt), std::string::npos);
    }
}

TEST(AclApiOff, AclEndpointsSayAclsAreDisabledAndOtherRoutesNeedNoToken) {
  ApiServer server;
  server.start();
  auto r = http_request(server.port, "POST", "/v1/acl/bootstrap");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("--acl"), std::string::npos);
  EXPECT_EQ(http_request(server.port, "GET", "/v1/volumes").status, 200u);
}

}  // namespace mooring::controlplane
