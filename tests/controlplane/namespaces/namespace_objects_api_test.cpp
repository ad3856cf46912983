// Namespaces as objects on the REST API (ACLs on, over a real socket): apply, read, list and
// delete; a write into a namespace that does not exist is refused naming it and changes nothing;
// delete is refused while the namespace holds volumes or allocations; each quota limit refuses
// the write past it with a 409 naming the limit and the figures; apply and delete need
// operator:write, and a namespace token reads its own namespace only.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/controlplane/support/acl_api_fixture.hpp"

namespace mooring::controlplane {
namespace {

using json = nlohmann::json;
using support::parse;

std::string volume_in(const std::string& ns, const std::string& id, std::int64_t min_bytes = 0) {
  json v = {{"ID", id},
            {"Namespace", ns},
            {"PluginID", "hostpath"},
            {"ExternalID", "ext-" + ns + "-" + id},
            {"RequestedCapabilities", {{{"AccessMode", "single-node-writer"}, {"AttachmentMode", "file-system"}}}}};
  if (min_bytes > 0) v["RequestedCapacityMin"] = min_bytes;
  return json{{"Volumes", {v}}}.dump();
}

const std::string kAllocation = json{{"Allocation", {{"Name", "job"}}}}.dump();

class NamespaceObjectsTest : public support::AclApiFixture {
 protected:
  void SetUp() override {
    AclApiFixture::SetUp();
    mgmt = bootstrap();
  }
  HttpResult apply(const std::string& name, const json& body) {
    return call("PUT", "/v1/namespace/" + name, body.dump(), mgmt);
  }
  std::string error_of(const HttpResult& r) { return parse(r).value("Error", std::string()); }
  std::string mgmt;
};

TEST_F(NamespaceObjectsTest, ApplyReadListUpdateAndDelete) {
  auto made = apply("team-a", {{"Description", "the A team"}, {"Quota", {{"MaxVolumes", 3}}}});
  ASSERT_EQ(made.status, 200u) << made.body;
  EXPECT_EQ(parse(made)["Quota"]["MaxVolumes"], 3);
  auto read = parse(call("GET", "/v1/namespace/team-a", "", mgmt));
  EXPECT_EQ(read["Description"], "the A team");
  EXPECT_TRUE(read["Quota"]["MaxCapacityBytes"].is_null());
  EXPECT_EQ(read["Usage"], (json{{"Volumes", 0}, {"CapacityBytes", 0}, {"RunningAllocations", 0}}));
  const auto created = read["CreateIndex"].get<std::uint64_t>();

  std::set<std::string> names;
  for (const auto& n : parse(call("GET", "/v1/namespaces", "", mgmt))) names.insert(n["Name"]);
  EXPECT_EQ(names, (std::set<std::string>{"default", "team-a"}));  // default is there without a record

  ASSERT_EQ(apply("team-a", {{"Description", "renamed"}}).status, 200u);
  read = parse(call("GET", "/v1/namespace/team-a", "", mgmt));
  EXPECT_EQ(read["CreateIndex"], created);
  EXPECT_GT(read["ModifyIndex"].get<std::uint64_t>(), created);
  EXPECT_TRUE(read["Quota"]["MaxVolumes"].is_null());  // apply replaces the record (the CLI merges)

  auto events = parse(call("GET", "/v1/events?topic=Namespace&namespace=team-a", "", mgmt));
  ASSERT_EQ(events.size(), 2u) << events.dump();
  EXPECT_EQ(events[0]["Type"], "NamespaceCreated");
  EXPECT_EQ(events[1]["Type"], "NamespaceUpdated");

  ASSERT_EQ(call("DELETE", "/v1/namespace/team-a", "", mgmt).status, 200u);
  auto gone = call("GET", "/v1/namespace/team-a", "", mgmt);
  EXPECT_EQ(gone.status, 404u);
  EXPECT_EQ(error_of(gone), "namespace not found: team-a");
  EXPECT_EQ(call("DELETE", "/v1/namespace/team-a", "", mgmt).status, 404u);
  auto keep_default = call("DELETE", "/v1/namespace/default", "", mgmt);
  EXPECT_EQ(keep_default.status, 409u);
  EXPECT_EQ(error_of(keep_default), "namespace \"default\" always exists; it cannot be deleted");
}

TEST_F(NamespaceObjectsTest, BadInputIs400NamingTheFieldAndChangesNothing) {
  const auto before = fingerprint();
  auto name = call("PUT", "/v1/namespace/team%20a", "{}", mgmt);
  EXPECT_EQ(name.status, 400u);
  EXPECT_NE(error_of(name).find("path parameter \"name\": invalid namespace"), std::string::npos) << name.body;
  auto limit = apply("team-a", {{"Quota", {{"MaxVolumes", -2}}}});
  EXPECT_EQ(limit.status, 400u);
  EXPECT_EQ(error_of(limit),
            "namespace \"team-a\": field \"Quota.MaxVolumes\": must be a non-negative integer or null, got -2");
  auto unknown_field = apply("team-a", {{"Quota", {{"MaxDisks", 1}}}});
  EXPECT_EQ(unknown_field.status, 400u);
  EXPECT_NE(error_of(unknown_field).find("field \"Quota.MaxDisks\": unknown"), std::string::npos);
  EXPECT_EQ(call("PUT", "/v1/namespace/team-a", "{not json", mgmt).status, 400u);
  EXPECT_EQ(apply("team-a", {{"Name", "team-b"}}).status, 400u);
  EXPECT_EQ(fingerprint(), before);
}

TEST_F(NamespaceObjectsTest, AWriteIntoAnUnknownNamespaceIsRefusedNamingItAndChangesNothing) {
  const auto before = fingerprint();
  const std::string why =
      "namespace \"team-x\" does not exist; create it first with PUT /v1/namespace/team-x (mooring namespace apply "
      "team-x)";
  const std::vector<std::pair<std::string, std::string>> writes{
      {"/v1/volume/csi/v1?namespace=team-x", volume_in("team-x", "v1")},
      {"/v1/volumes", volume_in("team-x", "v1")},
      {"/v1/volume/csi/v1/create?namespace=team-x", volume_in("team-x", "v1")},
      {"/v1/allocations?namespace=team-x", kAllocation},
      {"/v1/volumes/snapshot?namespace=team-x",
       json{{"Snapshots", {{{"SourceVolumeID", "vol-1"}, {"PluginID", "hostpath"}, {"Name", "s"}}}}}.dump()},
  };
  for (const auto& [target, body] : writes) {
    auto r = call("PUT", target, body, mgmt);
    EXPECT_EQ(r.status, 400u) << target << ": " << r.body;
    EXPECT_EQ(error_of(r), why) << target;
  }
  // An ACL policy's rule for one namespace names one that exists; a glob names none.
  auto policy = call("PUT", "/v1/acl/policy/ops",
                     json{{"Rules", {{"Namespace", {{"team-x", {{"Policy", "read"}}}}}}}}.dump(), mgmt);
  EXPECT_EQ(policy.status, 400u);
  EXPECT_EQ(error_of(policy), "ACL policy \"ops\": field \"Rules.Namespace.team-x\": " + why);
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(call("PUT", "/v1/acl/policy/ops",
                 json{{"Rules", {{"Namespace", {{"team-*", {{"Policy", "read"}}}}}}}}.dump(), mgmt)
                .status,
            200u);
  // Reads of an unknown namespace find nothing, as before.
  auto list = call("GET", "/v1/volumes?namespace=team-x", "", mgmt);
  EXPECT_EQ(list.status, 200u);
  EXPECT_TRUE(parse(list).empty());
}

TEST_F(NamespaceObjectsTest, DeleteIsRefusedWhileItHoldsVolumesOrAllocationsSayingHowMany) {
  ASSERT_EQ(apply("team-a", json::object()).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volumes", volume_in("team-a", "v1"), mgmt).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volumes", volume_in("team-a", "v2"), mgmt).status, 200u);
  auto placed = call("POST", "/v1/allocations?namespace=team-a", kAllocation, mgmt);
  ASSERT_EQ(placed.status, 200u) << placed.body;
  const auto before = fingerprint();
  auto refused = call("DELETE", "/v1/namespace/team-a", "", mgmt);
  EXPECT_EQ(refused.status, 409u);
  EXPECT_EQ(error_of(refused),
            "namespace \"team-a\" still holds 2 volume(s) and 1 allocation(s) that are not terminal; deregister and "
            "stop them first");
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(parse(call("GET", "/v1/namespace/team-a", "", mgmt))["Usage"]["RunningAllocations"], 1);
}

TEST_F(NamespaceObjectsTest, MaxVolumesPassesTheLastSlotAndRefusesTheNextNamingTheFigures) {
  ASSERT_EQ(apply("team-a", {{"Quota", {{"MaxVolumes", 2}}}}).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volumes", volume_in("team-a", "v1"), mgmt).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volumes", volume_in("team-a", "v2"), mgmt).status, 200u);  // the last slot
  const auto before = fingerprint();
  auto over = call("PUT", "/v1/volumes", volume_in("team-a", "v3"), mgmt);
  EXPECT_EQ(over.status, 409u);
  EXPECT_EQ(error_of(over), "namespace \"team-a\": quota MaxVolumes is 2; it holds 2 volumes and this request adds 1");
  EXPECT_EQ(fingerprint(), before);
  // Updating a volume it holds takes no slot; another namespace has its own.
  EXPECT_EQ(call("PUT", "/v1/volumes", volume_in("team-a", "v1"), mgmt).status, 200u);
  EXPECT_EQ(call("PUT", "/v1/volumes", volume_in("default", "v3"), mgmt).status, 200u);
}

TEST_F(NamespaceObjectsTest, MaxCapacityBytesCountsRequestedCapacity) {
  ASSERT_EQ(apply("team-a", {{"Quota", {{"MaxCapacityBytes", 100}}}}).status, 200u);
  ASSERT_EQ(call("PUT", "/v1/volumes", volume_in("team-a", "v1", 60), mgmt).status, 200u);
  const auto before = fingerprint();
  auto over = call("PUT", "/v1/volumes", volume_in("team-a", "v2", 41), mgmt);
  EXPECT_EQ(over.status, 409u);
  EXPECT_EQ(error_of(over),
            "namespace \"team-a\": quota MaxCapacityBytes is 100; it holds 60 bytes of requested capacity and this "
            "request adds 41");
  EXPECT_EQ(fingerprint(), before);
  EXPECT_EQ(call("PUT", "/v1/volumes", volume_in("team-a", "v2", 40), mgmt).status, 200u);
  EXPECT_EQ(parse(call("GET", "/v1/namespace/team-a", "", mgmt))["Usage"]["CapacityBytes"], 100);
}

TEST_F(NamespaceObjectsTest, MaxRunningAllocationsFreesASlotWhenOneEnds) {
  ASSERT_EQ(apply("team-a", {{"Quota", {{"MaxRunningAllocations", 1}}}}).status, 200u);
  auto first = call("POST", "/v1/allocations?namespace=team-a", kAllocation, mgmt);
  ASSERT_EQ(first.status, 200u) << first.body;
  const auto before = fingerprint();
  auto over = call("POST", "/v1/allocations?namespace=team-a", kAllocation, mgmt);
  EXPECT_EQ(over.status, 409u);
  EXPECT_EQ(error_of(over),
            "namespace \"team-a\": quota MaxRunningAllocations is 1; it holds 1 running allocations and this request "
            "adds 1");
  EXPECT_EQ(fingerprint(), before);
  const std::string id = parse(first)["ID"];
  server.on_io([&] {  // its node reports it complete
    auto a = *server.store.allocation(id);
    a.client_status = domain::ClientStatus::complete;
    Batch b;
    b.put(a);
    return server.store.commit(std::move(b)).ok();
  });
  EXPECT_EQ(call("POST", "/v1/allocations?namespace=team-a", kAllocation, mgmt).status, 200u);
}

TEST_F(NamespaceObjectsTest, ApplyAndDeleteNeedOperatorWrite) {
  const auto writer = token_with(mgmt, "writer", {{"Namespace", {{"*", {{"Policy", "write"}}}}}});
  const auto before = fingerprint();
  auto refused = call("PUT", "/v1/namespace/team-a", "{}", writer);
  EXPECT_EQ(refused.status, 403u);
  EXPECT_EQ(error_of(refused), "permission denied: token \"writer-token\" lacks operator:write");
  EXPECT_EQ(call("DELETE", "/v1/namespace/team-a", "", writer).status, 403u);
  EXPECT_EQ(call("PUT", "/v1/namespace/team-a", "{}").status, 401u);  // no token
  EXPECT_EQ(fingerprint(), before);
  const auto ops = token_with(mgmt, "ops", {{"Operator", "write"}});
  EXPECT_EQ(call("PUT", "/v1/namespace/team-a", "{}", ops).status, 200u);
  EXPECT_EQ(call("DELETE", "/v1/namespace/team-a", "", ops).status, 200u);
}

TEST_F(NamespaceObjectsTest, ANamespaceTokenReadsItsOwnNamespaceOnly) {
  ASSERT_EQ(apply("team-a", json::object()).status, 200u);
  ASSERT_EQ(apply("team-b", json::object()).status, 200u);
  const auto team_a = token_with(mgmt, "team-a", {{"Namespace", {{"team-a", {{"Policy", "read"}}}}}});
  EXPECT_EQ(call("GET", "/v1/namespace/team-a", "", team_a).status, 200u);
  auto other = call("GET", "/v1/namespace/team-b", "", team_a);
  EXPECT_EQ(other.status, 403u);
  EXPECT_EQ(error_of(other),
            "permission denied: token \"team-a-token\" lacks a capability in namespace \"team-b\" (or operator:read) "
            "to read it");
  // A namespace it may not read answers 403 whether or not it exists: no probing for names.
  EXPECT_EQ(call("GET", "/v1/namespace/team-zz", "", team_a).status, 403u);
  auto list = parse(call("GET", "/v1/namespaces", "", team_a));
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(list[0]["Name"], "team-a");
  // Its list is its own, not the one the management token saw a moment before.
  EXPECT_EQ(parse(call("GET", "/v1/namespaces", "", mgmt)).size(), 3u);
  EXPECT_EQ(parse(call("GET", "/v1/namespaces", "", team_a)).size(), 1u);
  const auto reader = token_with(mgmt, "reader", {{"Operator", "read"}});
  EXPECT_EQ(parse(call("GET", "/v1/namespaces", "", reader)).size(), 3u);
  EXPECT_EQ(call("GET", "/v1/namespaces").status, 401u);  // no token, no anonymous policy
}

}  // namespace
}  // namespace mooring::controlplane
