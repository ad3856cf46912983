// The namespace rules on a store: "default" exists without a record, each quota limit holds at
// its boundary (the last slot passes, one more is refused naming the limit and the figures), a
// lowered quota still lets a namespace shrink, delete is refused while it holds anything, and
// the records made at start cover every namespace already in use.
#include "services/controlplane/namespaces/namespace_rules.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "tests/controlplane/support/fake_backend.hpp"
#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane::namespaces {
namespace {

namespace asio = boost::asio;

class NamespaceRulesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store.load()); }
  void put(NamespaceRecord r) {
    Batch b;
    b.put(std::move(r));
    ASSERT_TRUE(store.commit(std::move(b)));
  }
  void add_volume(const std::string& ns, const std::string& id, std::int64_t min, std::int64_t max = 0) {
    auto v = fixtures::volume(id);
    v.ns = ns;
    v.requested_capacity_min = min;
    v.requested_capacity_max = max;
    Batch b;
    b.put(v);
    ASSERT_TRUE(store.commit(std::move(b)));
  }
  void add_allocation(const std::string& ns, const std::string& id, domain::ClientStatus status) {
    auto a = fixtures::allocation(id, "node-1");
    a.ns = ns;
    a.client_status = status;
    Batch b;
    b.put(a);
    ASSERT_TRUE(store.commit(std::move(b)));
  }
  asio::io_context io;
  FakeBackend backend;
  StateStore store{io.get_executor(), backend};
};

TEST_F(NamespaceRulesTest, DefaultExistsWithoutARecordAndOthersOnlyWithOne) {
  EXPECT_TRUE(exists(store, "default"));
  EXPECT_FALSE(exists(store, "team-a"));
  auto no = unknown(store, "team-a");
  ASSERT_TRUE(no);
  EXPECT_EQ(*no,
            "namespace \"team-a\" does not exist; create it first with PUT /v1/namespace/team-a "
            "(mooring namespace apply team-a)");
  put({.name = "team-a"});
  EXPECT_TRUE(exists(store, "team-a"));
  EXPECT_FALSE(unknown(store, "team-a"));
  // A write into a namespace that is gone is refused at the check its commit makes.
  EXPECT_EQ(over_quota(store, "team-b", {.volumes = 1}), unknown(store, "team-b"));
}

TEST_F(NamespaceRulesTest, MaxVolumesPassesTheLastSlotAndRefusesOneMore) {
  put({.name = "team-a", .quota = {.max_volumes = 2}});
  add_volume("team-a", "v1", 0);
  add_volume("default", "v2", 0);  // another namespace's volume does not count
  EXPECT_FALSE(over_quota(store, "team-a", {.volumes = 1}));
  EXPECT_EQ(over_quota(store, "team-a", {.volumes = 2}),
            "namespace \"team-a\": quota MaxVolumes is 2; it holds 1 volumes and this request adds 2");
  add_volume("team-a", "v3", 0);
  EXPECT_TRUE(over_quota(store, "team-a", {.volumes = 1}));
  EXPECT_FALSE(over_quota(store, "team-a", {.volumes = 0}));  // an update of a stored volume
}

TEST_F(NamespaceRulesTest, MaxCapacityCountsTheMinimumOrElseTheMaximum) {
  put({.name = "team-a", .quota = {.max_capacity_bytes = 100}});
  add_volume("team-a", "v1", 40, 90);  // counts 40
  add_volume("team-a", "v2", 0, 50);   // counts 50
  EXPECT_EQ(usage(store, "team-a").capacity_bytes, 90);
  EXPECT_FALSE(over_quota(store, "team-a", {.volumes = 1, .capacity_bytes = 10}));
  EXPECT_EQ(over_quota(store, "team-a", {.volumes = 1, .capacity_bytes = 11}),
            "namespace \"team-a\": quota MaxCapacityBytes is 100; it holds 90 bytes of requested capacity and this "
            "request adds 11");
}

TEST_F(NamespaceRulesTest, ALoweredQuotaStillLetsTheNamespaceShrink) {
  add_volume("team-a", "v1", 100);
  put({.name = "team-a", .quota = {.max_volumes = 0, .max_capacity_bytes = 10}});
  EXPECT_FALSE(over_quota(store, "team-a", {.capacity_bytes = -50}));  // a smaller request on v1
  EXPECT_TRUE(over_quota(store, "team-a", {.capacity_bytes = 1}));
  EXPECT_TRUE(over_quota(store, "team-a", {.volumes = 1}));  // 0: none may be added
}

TEST_F(NamespaceRulesTest, RunningAllocationsLeaveOutTerminalOnesAndSystemGroups) {
  put({.name = "team-a", .quota = {.max_running_allocations = 2}});
  add_allocation("team-a", "a1", domain::ClientStatus::running);
  add_allocation("team-a", "a2", domain::ClientStatus::complete);
  auto group = fixtures::allocation("g1");
  group.ns = "team-a";
  group.system = true;
  Batch b;
  b.put(group);
  ASSERT_TRUE(store.commit(std::move(b)));
  EXPECT_EQ(usage(store, "team-a").running_allocations, 1);
  EXPECT_FALSE(over_quota(store, "team-a", {.running_allocations = 1}));
  EXPECT_EQ(over_quota(store, "team-a", {.running_allocations = 2}),
            "namespace \"team-a\": quota MaxRunningAllocations is 2; it holds 1 running allocations and this "
            "request adds 2");
}

TEST_F(NamespaceRulesTest, DeleteIsRefusedWhileItHoldsVolumesOrLiveAllocations) {
  put({.name = "team-a"});
  EXPECT_EQ(delete_refusal(store, "default"), "namespace \"default\" always exists; it cannot be deleted");
  EXPECT_FALSE(delete_refusal(store, "team-a"));
  add_volume("team-a", "v1", 0);
  add_allocation("team-a", "a1", domain::ClientStatus::pending);
  add_allocation("team-a", "a2", domain::ClientStatus::failed);  // terminal: does not hold it
  EXPECT_EQ(delete_refusal(store, "team-a"),
            "namespace \"team-a\" still holds 1 volume(s) and 1 allocation(s) that are not terminal; deregister and "
            "stop them first");
}

TEST_F(NamespaceRulesTest, AtStartEveryNamespaceInUseGetsARecordOnce) {
  add_volume("team-a", "v1", 0);
  add_allocation("team-b", "a1", domain::ClientStatus::running);
  Batch b;
  b.put(SnapshotRecord{.plugin_id = "hostpath", .id = "s1", .ns = "team-c"});
  acl::Policy p;
  p.name = "ops";
  p.namespaces["team-d"] = {};
  p.namespaces["team-*"] = {};  // a glob names no one namespace
  b.put(p);
  put({.name = "team-e", .description = "kept"});
  ASSERT_TRUE(store.commit(std::move(b)));

  ASSERT_TRUE(store.commit(adopt_existing(store)));
  std::set<std::string> names;
  for (const auto& [name, r] : store.namespace_records()) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"team-a", "team-b", "team-c", "team-d", "team-e"}));  // default needs none
  EXPECT_EQ(store.namespace_record("team-e")->description, "kept");
  EXPECT_TRUE(adopt_existing(store).empty());  // a second start adds nothing
}

}  // namespace
}  // namespace mooring::controlplane::namespaces
