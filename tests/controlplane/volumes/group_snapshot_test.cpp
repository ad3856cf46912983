// Group snapshots in the volumes room: every member checked before the plugin is asked, one call
// holding every member volume's lock, an uncertain create undone in the background, and the
// groups read back from the plugin's snapshot listing.
#include <nlohmann/json.hpp>

#include "services/controlplane/volumes/outcome.hpp"
#include "tests/controlplane/volumes/lifecycle_fixture.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

namespace {

using grpc::StatusCode;
using Kind = volumes::Failure::Kind;

class GroupSnapshotTest : public VolumeLifecycleTest {
 protected:
  GroupSnapshotTest() {
    allow_groups(true);
    Batch batch;
    batch.put(fixtures::volume("a"));
    batch.put(fixtures::volume("b"));
    auto other = fixtures::volume("c", "other");
    batch.put(other);
    auto elsewhere = fixtures::volume("d");
    elsewhere.ns = "team-b";
    batch.put(elsewhere);
    EXPECT_TRUE(store.commit(std::move(batch)));
  }

  void allow_groups(bool on) {
    auto p = *store.plugin("hostpath");
    for (auto& [id, inst] : p.controllers)
      if (inst.controller_info) inst.controller_info->supports_group_snapshot = inst.controller_info->supports_list_snapshots = on;
    Batch batch;
    fixtures::put_running(batch, {p}, &store);
    EXPECT_TRUE(store.commit(std::move(batch)));
  }

  static ::csi::v1::Snapshot member(const std::string& id, const std::string& source, const std::string& group) {
    ::csi::v1::Snapshot s;
    s.set_snapshot_id(id);
    s.set_source_volume_id(source);
    s.set_group_snapshot_id(group);
    s.set_ready_to_use(true);
    s.mutable_creation_time()->set_seconds(1700000000);
    return s;
  }
  static ::csi::v1::CreateVolumeGroupSnapshotResponse made(const std::string& group) {
    ::csi::v1::CreateVolumeGroupSnapshotResponse r;
    auto* g = r.mutable_group_snapshot();
    g->set_group_snapshot_id(group);
    g->set_ready_to_use(true);
    *g->add_snapshots() = member("snap-a", "ext-a", group);
    *g->add_snapshots() = member("snap-b", "ext-b", group);
    return r;
  }
  // One page listing the group's members beside a plain snapshot.
  void list_members(const std::string& group) {
    ::csi::v1::ListSnapshotsResponse page;
    *page.add_entries()->mutable_snapshot() = member("snap-a", "ext-a", group);
    *page.add_entries()->mutable_snapshot() = member("snap-x", "ext-a", "");
    *page.add_entries()->mutable_snapshot() = member("snap-b", "ext-b", group);
    controller.snapshot_lists.script.push_back(FakeController::ok(page));
  }
  volumes::GroupSnapshotRequest wanted(std::vector<std::string> ids) {
    return {.name = "nightly", .volume_ids = std::move(ids), .secrets = {{"body", "1"}}};
  }
};

}  // namespace

TEST_F(GroupSnapshotTest, PlanResolvesEveryMemberAndMergesTheirSecrets) {
  auto plan = lifecycle.plan_group_snapshot(wanted({"a", "b"}), {{"header", "2"}});
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->plugin_id, "hostpath");
  EXPECT_EQ(plan->external_ids, (std::vector<std::string>{"ext-a", "ext-b"}));
  EXPECT_EQ(plan->volume_keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(plan->secrets, (volumes::StringMap{{"password", "hunter2"}, {"body", "1"}, {"header", "2"}}));
}

TEST_F(GroupSnapshotTest, PlanRefusesWhatCannotBeOneGroupNamingTheVolume) {
  auto missing = lifecycle.plan_group_snapshot(wanted({"a", "nope"}), {});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, Kind::invalid);
  EXPECT_NE(missing.error().message.find("\"nope\""), std::string::npos) << missing.error().message;
  // Another namespace's volume is not the caller's to snapshot.
  auto foreign = lifecycle.plan_group_snapshot(wanted({"a", "d"}), {});
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().kind, Kind::invalid);
  EXPECT_NE(foreign.error().message.find("\"d\""), std::string::npos) << foreign.error().message;
  auto mixed = lifecycle.plan_group_snapshot(wanted({"a", "c"}), {});
  ASSERT_FALSE(mixed);
  EXPECT_EQ(mixed.error().kind, Kind::invalid);
  EXPECT_NE(mixed.error().message.find("\"c\" belongs to plugin \"other\""), std::string::npos) << mixed.error().message;
  auto twice = lifecycle.plan_group_snapshot(wanted({"a", "a"}), {});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().kind, Kind::invalid);
  EXPECT_FALSE(lifecycle.plan_group_snapshot(wanted({}), {}));
  allow_groups(false);
  auto unsupported = lifecycle.plan_group_snapshot(wanted({"a", "b"}), {});
  ASSERT_FALSE(unsupported);
  EXPECT_NE(unsupported.error().message.find("group snapshots"), std::string::npos) << unsupported.error().message;
  EXPECT_TRUE(controller.group_creates.requests.empty());
}

TEST_F(GroupSnapshotTest, PlanRefusesAVolumeBeingDeleted) {
  auto v = *store.volume("b");
  v.deleting = true;
  Batch batch;
  batch.put(v);
  seed(std::move(batch));
  auto r = lifecycle.plan_group_snapshot(wanted({"a", "b"}), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
}

TEST_F(GroupSnapshotTest, CreateSendsOneCallHoldingEveryMemberAndNamesTheSources) {
  controller.group_creates.script.push_back(FakeController::ok(made("group-1")));
  auto plan = lifecycle.plan_group_snapshot(wanted({"b", "a"}), {});
  ASSERT_TRUE(plan) << plan.error().message;
  auto r = run(lifecycle.create_group_snapshot(*plan));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(controller.group_creates.requests.size(), 1u);
  const auto& sent = controller.group_creates.requests[0];
  EXPECT_EQ(sent.name(), "nightly");
  EXPECT_EQ(std::vector<std::string>(sent.source_volume_ids().begin(), sent.source_volume_ids().end()),
            (std::vector<std::string>{"ext-b", "ext-a"}));
  EXPECT_EQ(sent.secrets().at("password"), "hunter2");
  EXPECT_EQ(controller.group_create_keys.at(0), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(r->id, "group-1");
  EXPECT_EQ(r->name, "nightly");
  ASSERT_EQ(r->snapshots.size(), 2u);
  EXPECT_EQ(r->snapshots[0].source_volume_id, "a");
  EXPECT_EQ(r->snapshots[0].group_snapshot_id, "group-1");
  EXPECT_EQ(r->snapshots[1].source_volume_id, "b");
  // Each member volume gets an event.
  int events = 0;
  for (const auto& e : store.events())
    if (e.type == "GroupSnapshotCreated") ++events;
  EXPECT_EQ(events, 2);
}

TEST_F(GroupSnapshotTest, AnUncertainCreateIsDeletedInTheBackgroundWithTheGroupsMembers) {
  controller.group_creates.script.push_back(FakeController::failed<::csi::v1::CreateVolumeGroupSnapshotResponse>(
      csi::Rpc::CreateVolumeGroupSnapshot, StatusCode::DEADLINE_EXCEEDED));
  controller.group_creates.script.push_back(FakeController::ok(made("group-late")));
  controller.group_deletes.script.push_back(FakeController::ok(::csi::v1::DeleteVolumeGroupSnapshotResponse{}));
  auto plan = lifecycle.plan_group_snapshot(wanted({"a", "b"}), {});
  ASSERT_TRUE(plan) << plan.error().message;
  auto r = run(lifecycle.create_group_snapshot(*plan));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::timeout);
  ASSERT_EQ(controller.group_creates.requests.size(), 2u);
  EXPECT_EQ(controller.group_creates.requests[1].name(), "nightly");
  ASSERT_EQ(controller.group_deletes.requests.size(), 1u);
  const auto& del = controller.group_deletes.requests[0];
  EXPECT_EQ(del.group_snapshot_id(), "group-late");
  EXPECT_EQ(std::vector<std::string>(del.snapshot_ids().begin(), del.snapshot_ids().end()),
            (std::vector<std::string>{"snap-a", "snap-b"}));
  EXPECT_EQ(del.secrets().at("password"), "hunter2");
}

TEST_F(GroupSnapshotTest, ARefusedCreateIsNotNegated) {
  controller.group_creates.script.push_back(FakeController::failed<::csi::v1::CreateVolumeGroupSnapshotResponse>(
      csi::Rpc::CreateVolumeGroupSnapshot, StatusCode::ALREADY_EXISTS));
  auto plan = lifecycle.plan_group_snapshot(wanted({"a", "b"}), {});
  ASSERT_TRUE(plan) << plan.error().message;
  auto r = run(lifecycle.create_group_snapshot(*plan));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_EQ(controller.group_creates.requests.size(), 1u);
  EXPECT_TRUE(controller.group_deletes.requests.empty());
}

TEST_F(GroupSnapshotTest, DeleteNamesTheMembersThePluginLists) {
  list_members("group-1");
  controller.group_deletes.script.push_back(FakeController::ok(::csi::v1::DeleteVolumeGroupSnapshotResponse{}));
  auto r = run(lifecycle.delete_group_snapshot("hostpath", "group-1", {}, {{"token", "t"}}, anyone));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(controller.group_deletes.requests.size(), 1u);
  const auto& del = controller.group_deletes.requests[0];
  EXPECT_EQ(std::vector<std::string>(del.snapshot_ids().begin(), del.snapshot_ids().end()),
            (std::vector<std::string>{"snap-a", "snap-b"}));
  EXPECT_EQ(del.secrets().at("token"), "t");
  auto unknown = run(lifecycle.delete_group_snapshot("nope", "group-1", {}, {}, anyone));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, Kind::not_found);
}

// Members the caller names are checked against the plugin's listing: exactly the members, or 400
// naming the others, before the plugin is asked to delete anything.
TEST_F(GroupSnapshotTest, NamedMembersMustBeExactlyTheListedOnes) {
  for (const auto& named : {std::vector<std::string>{"snap-a", "snap-z"}, std::vector<std::string>{"snap-a"}}) {
    list_members("group-1");
    auto r = run(lifecycle.delete_group_snapshot("hostpath", "group-1", named, {}, anyone));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, Kind::invalid);
    EXPECT_NE(r.error().message.find(named.size() == 2 ? "\"snap-z\", not members" : "leaves out its members \"snap-b\""),
              std::string::npos)
        << r.error().message;
  }
  list_members("group-1");
  controller.group_deletes.script.push_back(FakeController::ok(::csi::v1::DeleteVolumeGroupSnapshotResponse{}));
  ASSERT_TRUE(run(lifecycle.delete_group_snapshot("hostpath", "group-1", {"snap-b", "snap-a"}, {}, anyone)));
  ASSERT_EQ(controller.group_deletes.requests.size(), 1u);
  EXPECT_EQ(controller.group_deletes.requests[0].snapshot_ids_size(), 2);
}

// Boundary: a token of namespace "default" names its own snapshot with team-b's group id. The
// owners come from the group's listed members, not the named ids: refused, nothing deleted.
TEST_F(GroupSnapshotTest, AnotherNamespacesGroupWithOnesOwnSnapshotIdIsRefused) {
  ::csi::v1::ListSnapshotsResponse page;
  *page.add_entries()->mutable_snapshot() = member("snap-a", "ext-a", "");          // default's, in no group
  *page.add_entries()->mutable_snapshot() = member("snap-d", "ext-d", "group-b");   // team-b's group
  for (int i = 0; i < 2; ++i) controller.snapshot_lists.script.push_back(FakeController::ok(page));
  auto p = acl::parse_policy(nlohmann::json::parse(R"({"Rules":{"Namespace":{"default":{"Policy":"write"}}}})"), "p");
  ASSERT_TRUE(p);
  const volumes::Asker mine{.acl = acl::Acl::from_policies({&*p}), .token = "t", .ns = "default"};
  for (const auto& named : {std::vector<std::string>{"snap-a"}, std::vector<std::string>{}}) {
    auto r = run(lifecycle.delete_group_snapshot("hostpath", "group-b", named, {}, mine));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, Kind::forbidden) << r.error().message;
    EXPECT_EQ(r.error().message.find("team-b"), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(controller.group_deletes.requests.empty());
}

// A plugin that cannot list its snapshots: the members are the caller's, each looked up (a
// nobody's snapshot needs operator:write); without them, 400 saying to name them.
TEST_F(GroupSnapshotTest, APluginThatCannotListTakesTheNamedMembersEachLookedUp) {
  auto p = *store.plugin("hostpath");
  for (auto& [id, inst] : p.controllers) inst.controller_info->supports_list_snapshots = false;
  Batch batch;
  fixtures::put_running(batch, {p}, &store);
  ASSERT_TRUE(store.commit(std::move(batch)));
  auto unnamed = run(lifecycle.delete_group_snapshot("hostpath", "group-1", {}, {}, anyone));
  ASSERT_FALSE(unnamed);
  EXPECT_EQ(unnamed.error().kind, Kind::invalid);
  EXPECT_NE(unnamed.error().message.find("snapshot_ids"), std::string::npos) << unnamed.error().message;
  controller.group_deletes.script.push_back(FakeController::ok(::csi::v1::DeleteVolumeGroupSnapshotResponse{}));
  ASSERT_TRUE(run(lifecycle.delete_group_snapshot("hostpath", "group-1", {"snap-z"}, {}, anyone)));
  EXPECT_TRUE(controller.snapshot_lists.requests.empty());
  EXPECT_EQ(controller.group_deletes.requests.at(0).snapshot_ids(0), "snap-z");
}

// Listing and reading groups rest on ListSnapshots: a plugin without it is never called blind.
// Its groups cannot be listed (400 naming why); one Mooring made is read from Mooring's record;
// while the capability is unknown (its agent starting) the answer is 503, not a guess.
TEST_F(GroupSnapshotTest, APluginThatCannotListIsNotAskedToListAndItsRecordedGroupIsRead) {
  auto p = *store.plugin("hostpath");
  for (auto& [id, inst] : p.controllers) inst.controller_info->supports_list_snapshots = false;
  Batch batch;
  fixtures::put_running(batch, {p}, &store);
  batch.put(SnapshotRecord{.plugin_id = "hostpath",
                           .id = "snap-a",
                           .ns = "default",
                           .source_volume_id = "a",
                           .external_source_volume_id = "ext-a",
                           .group_snapshot_id = "group-1"});
  ASSERT_TRUE(store.commit(std::move(batch)));
  auto listed = run(lifecycle.list_group_snapshots("hostpath", {}, anyone));
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error().kind, Kind::invalid);
  EXPECT_NE(listed.error().message.find("cannot list its snapshots"), std::string::npos) << listed.error().message;
  ::csi::v1::GetVolumeGroupSnapshotResponse got;
  *got.mutable_group_snapshot() = made("group-1").group_snapshot();
  controller.group_gets.script.push_back(FakeController::ok(got));
  auto r = run(lifecycle.get_group_snapshot("hostpath", "group-1", {}, anyone));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(controller.group_gets.requests.size(), 1u);
  ASSERT_EQ(controller.group_gets.requests[0].snapshot_ids_size(), 1);
  EXPECT_EQ(controller.group_gets.requests[0].snapshot_ids(0), "snap-a");
  auto unknown = run(lifecycle.get_group_snapshot("hostpath", "group-2", {}, anyone));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, Kind::not_found);
  EXPECT_TRUE(controller.snapshot_lists.requests.empty());
}

TEST_F(GroupSnapshotTest, WhileTheCapabilityIsUnknownListAndGetAskAgainLater) {
  auto p = *store.plugin("hostpath");
  for (auto& [id, inst] : p.controllers) inst.controller_info.reset();
  Batch batch;
  fixtures::put_running(batch, {p}, &store);
  ASSERT_TRUE(store.commit(std::move(batch)));
  auto listed = run(lifecycle.list_group_snapshots("hostpath", {}, anyone));
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error().kind, Kind::unavailable);
  auto got = run(lifecycle.get_group_snapshot("hostpath", "group-1", {}, anyone));
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().kind, Kind::unavailable);
  EXPECT_TRUE(controller.snapshot_lists.requests.empty());
  EXPECT_TRUE(controller.group_gets.requests.empty());
}

TEST_F(GroupSnapshotTest, ListGroupsThePluginsSnapshotsByTheirGroup) {
  list_members("group-1");
  auto r = run(lifecycle.list_group_snapshots("hostpath", {}, anyone));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(r->at(0).id, "group-1");
  ASSERT_EQ(r->at(0).snapshots.size(), 2u);
  EXPECT_EQ(r->at(0).snapshots[0].source_volume_id, "a");
  EXPECT_EQ(r->at(0).create_time, 1700000000);
}

TEST_F(GroupSnapshotTest, GetAsksThePluginWithTheListedMembersAndAnUnknownGroupIsNotFound) {
  list_members("group-1");
  ::csi::v1::GetVolumeGroupSnapshotResponse got;
  *got.mutable_group_snapshot() = made("group-1").group_snapshot();
  controller.group_gets.script.push_back(FakeController::ok(got));
  auto r = run(lifecycle.get_group_snapshot("hostpath", "group-1", {}, anyone));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->snapshots.size(), 2u);
  ASSERT_EQ(controller.group_gets.requests.size(), 1u);
  EXPECT_EQ(controller.group_gets.requests[0].snapshot_ids_size(), 2);
  list_members("group-1");
  auto none = run(lifecycle.get_group_snapshot("hostpath", "group-2", {}, anyone));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind, Kind::not_found);
}

}  // namespace mooring::controlplane
