// Tenancy of the objects a plugin holds, in the volumes room: every snapshot is recorded with its
// source volume's namespace (a snapshot taken before records counts as its registered source's);
// listings keep what the asker may list; CloneID and SnapshotID resolve to what the asker may read
// (by the id here or the plugin's); deletes of another namespace's snapshot are refused before
// any plugin call. Refusals name the right, never the object.
#include <nlohmann/json.hpp>

#include "tests/controlplane/volumes/lifecycle_fixture.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

namespace {

using Kind = volumes::Failure::Kind;

volumes::Asker asker_of(const std::string& ns, const std::string& policy_json) {
  auto p = acl::parse_policy(nlohmann::json::parse(policy_json), "p");
  if (!p) throw std::runtime_error(p.error());
  return {.acl = acl::Acl::from_policies({&*p}), .token = "t-" + ns, .ns = ns};
}

::csi::v1::Snapshot snap(const std::string& id, const std::string& source) {
  ::csi::v1::Snapshot s;
  s.set_snapshot_id(id);
  s.set_source_volume_id(source);
  s.set_ready_to_use(true);
  return s;
}

class TenancyTest : public VolumeLifecycleTest {
 protected:
  TenancyTest() {
    auto plugin = *store.plugin("hostpath");
    for (auto& [id, inst] : plugin.controllers) inst.controller_info->supports_list_snapshots = true;
    Batch batch;
    fixtures::put_running(batch, {plugin}, &store);
    for (const auto& [ns, id] : {std::pair{"team-a", "a"}, std::pair{"team-b", "b"}}) {
      batch.put(NamespaceRecord{.name = ns});  // writes land only in namespaces that exist
      auto v = fixtures::volume(id);
      v.ns = ns;
      v.provider = plugin.provider;  // as register stores it
      batch.put(v);
    }
    seed(std::move(batch));
  }

  // Named: class temporaries passed by value to a coroutine are what GCC 12 mishandles.
  const volumes::Asker team_a = asker_of("team-a", R"({"Rules":{"Namespace":{"team-a":{"Policy":"write"}}}})");
  const volumes::PageRequest first_page;
  const volumes::StringMap no_secrets;

  // Team B's snapshot "snap-b" of its volume "b", taken through the lifecycle (so recorded).
  void take_team_b_snapshot() {
    ::csi::v1::CreateSnapshotResponse made;
    *made.mutable_snapshot() = snap("snap-b", "ext-b");
    controller.snapshots.script.push_back(FakeController::ok(made));
    auto plan = lifecycle.plan_snapshot({.ns = "team-b", .volume_id = "b", .name = "nightly"}, {});
    ASSERT_TRUE(plan) << plan.error().message;
    std::vector<volumes::SnapshotRequest> planned{*plan};
    auto done = run(lifecycle.create_snapshots(planned));
    ASSERT_EQ(done.created.size(), 1u);
  }
  void list_answers(std::vector<::csi::v1::Snapshot> entries) {
    ::csi::v1::ListSnapshotsResponse page;
    for (auto& s : entries) *page.add_entries()->mutable_snapshot() = std::move(s);
    controller.snapshot_lists.script.push_back(FakeController::ok(page));
  }
  static domain::Volume in_team_a(const std::string& id, const std::string& clone, const std::string& snapshot) {
    auto v = fixtures::volume(id);
    v.ns = "team-a";
    v.external_id.clear();
    v.clone_id = clone;
    v.snapshot_id = snapshot;
    return v;
  }
  static void expect_names_nothing_of_team_b(const volumes::Failure& f) {
    for (const auto* theirs : {"team-b", "\"b\"", "ext-b", "snap-b", "nightly"})
      EXPECT_EQ(f.message.find(theirs), std::string::npos) << theirs << ": " << f.message;
  }
};

}  // namespace

TEST_F(TenancyTest, ASnapshotIsRecordedWithItsSourcesNamespaceUnderANamespacedName) {
  take_team_b_snapshot();
  EXPECT_EQ(controller.snapshots.requests.at(0).name(), "team-b:nightly");
  const auto* r = store.snapshot_record("hostpath", "snap-b");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->ns, "team-b");
  EXPECT_EQ(r->source_volume_id, "b");
  EXPECT_EQ(r->external_source_volume_id, "ext-b");
  EXPECT_EQ(r->name, "nightly");
  // Durable: a store loaded from the same backend has it.
  StateStore again{io.get_executor(), backend};
  ASSERT_TRUE(again.load());
  ASSERT_NE(again.snapshot_record("hostpath", "snap-b"), nullptr);
  EXPECT_EQ(*again.snapshot_record("hostpath", "snap-b"), *r);
}

TEST_F(TenancyTest, AListingKeepsWhatTheAskerMayListAndAnUnrecordedSnapshotIsItsSourcesNamespaces) {
  take_team_b_snapshot();
  // snap-old: taken before records, of team A's registered volume; snap-orphan: of nothing registered.
  list_answers({snap("snap-b", "ext-b"), snap("snap-old", "ext-a"), snap("snap-orphan", "ext-gone")});
  auto mine = run(lifecycle.list_snapshots("hostpath", first_page, no_secrets, team_a));
  ASSERT_TRUE(mine) << mine.error().message;
  ASSERT_EQ(mine->items.size(), 1u);
  EXPECT_EQ(mine->items[0].id, "snap-old");
  EXPECT_EQ(mine->items[0].ns, "team-a");
  EXPECT_EQ(mine->items[0].source_volume_id, "a");

  list_answers({snap("snap-b", "ext-b"), snap("snap-old", "ext-a"), snap("snap-orphan", "ext-gone")});
  auto all = run(lifecycle.list_snapshots("hostpath", first_page, no_secrets, anyone));
  ASSERT_TRUE(all);
  ASSERT_EQ(all->items.size(), 3u);
  EXPECT_EQ(all->items[0].ns, "team-b");
  EXPECT_EQ(all->items[0].source_volume_id, "b");
  EXPECT_EQ(all->items[2].ns, "");  // nobody's
}

TEST_F(TenancyTest, DeletingAnotherNamespacesSnapshotIsRefusedBeforeThePluginIsAsked) {
  take_team_b_snapshot();
  auto r = run(lifecycle.delete_snapshot("hostpath", "snap-b", no_secrets, team_a));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::forbidden);
  EXPECT_NE(r.error().message.find("csi-write-volume"), std::string::npos) << r.error().message;
  expect_names_nothing_of_team_b(r.error());
  EXPECT_TRUE(controller.snapshot_deletes.requests.empty());
  EXPECT_NE(store.snapshot_record("hostpath", "snap-b"), nullptr);

  // Nobody's (the plugin lists no such snapshot): operator:write, the same refusal.
  list_answers({});
  auto unknown = run(lifecycle.delete_snapshot("hostpath", "snap-x", no_secrets, team_a));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, r.error().message);

  // Team B deletes its own: the record goes with it.
  controller.snapshot_deletes.script.push_back(FakeController::ok(::csi::v1::DeleteSnapshotResponse{}));
  const auto team_b = asker_of("team-b", R"({"Rules":{"Namespace":{"team-b":{"Policy":"write"}}}})");
  auto own = run(lifecycle.delete_snapshot("hostpath", "snap-b", no_secrets, team_b));
  ASSERT_TRUE(own) << own.error().message;
  EXPECT_EQ(controller.snapshot_deletes.requests.size(), 1u);
  EXPECT_EQ(store.snapshot_record("hostpath", "snap-b"), nullptr);
}

TEST_F(TenancyTest, AnUnrecordedSnapshotOfTheAskersVolumeIsFoundByOneListingAndDeleted) {
  list_answers({snap("snap-old", "ext-a")});
  controller.snapshot_deletes.script.push_back(FakeController::ok(::csi::v1::DeleteSnapshotResponse{}));
  auto r = run(lifecycle.delete_snapshot("hostpath", "snap-old", no_secrets, team_a));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(controller.snapshot_lists.requests.size(), 1u);
  EXPECT_EQ(controller.snapshot_lists.requests[0].snapshot_id(), "snap-old");
  EXPECT_EQ(controller.snapshot_deletes.requests.size(), 1u);
}

// Without a record, whose a snapshot is comes from the plugin's listing: a plugin that cannot list
// makes it nobody's (operator:write, and ListSnapshots is never called: it would answer
// UNIMPLEMENTED); one whose capability is not known yet (its agent is starting) is "retry shortly".
TEST_F(TenancyTest, AnUnrecordedSnapshotOfAPluginThatCannotListIsNobodysAndUnknownIsRetryShortly) {
  // The plugin's controllers as `reported` leaves them, then team A deletes an unrecorded snapshot.
  const auto delete_with = [&](auto reported) {
    auto plugin = *store.plugin("hostpath");
    for (auto& [id, inst] : plugin.controllers) reported(inst.controller_info);
    Batch batch;
    fixtures::put_running(batch, {plugin}, &store);
    seed(std::move(batch));
    auto r = run(lifecycle.delete_snapshot("hostpath", "snap-old", no_secrets, team_a));
    EXPECT_FALSE(r);
    return r ? volumes::Failure{} : r.error();
  };
  const auto nobodys = delete_with([](auto& info) { info->supports_list_snapshots = false; });
  EXPECT_EQ(nobodys.kind, Kind::forbidden);
  EXPECT_NE(nobodys.message.find("operator:write"), std::string::npos) << nobodys.message;
  const auto starting = delete_with([](auto& info) { info.reset(); });  // reported, not fingerprinted yet
  EXPECT_EQ(starting.kind, Kind::unavailable);
  EXPECT_NE(starting.message.find("retry shortly"), std::string::npos) << starting.message;

  EXPECT_TRUE(controller.snapshot_lists.requests.empty());
  EXPECT_TRUE(controller.snapshot_deletes.requests.empty());
}

TEST_F(TenancyTest, CloneIdAndSnapshotIdOfAnotherNamespaceAreRefusedBeforeThePluginIsAsked) {
  take_team_b_snapshot();
  for (const auto& [clone, snapshot] : {std::pair{"ext-b", ""}, std::pair{"", "snap-b"}, std::pair{"ext-gone", ""}}) {
    const auto v = in_team_a("copy", clone, snapshot);
    auto r = run(lifecycle.create(v, team_a));
    ASSERT_FALSE(r) << clone << snapshot;
    EXPECT_EQ(r.error().kind, Kind::forbidden);
    EXPECT_NE(r.error().message.find("csi-read-volume"), std::string::npos) << r.error().message;
    expect_names_nothing_of_team_b(r.error());
  }
  EXPECT_TRUE(controller.creates.requests.empty());
  EXPECT_EQ(store.volume("team-a", "copy"), nullptr);
  // With operator:write, a plugin id nothing here names is allowed; another namespace's still is not.
  auto op = asker_of("team-a", R"({"Rules":{"Namespace":{"team-a":{"Policy":"write"}},"Operator":"write"}})");
  const auto of_team_b = in_team_a("copy", "ext-b", ""), of_nobody = in_team_a("copy", "ext-gone", "");
  EXPECT_EQ(run(lifecycle.create(of_team_b, op)).error().kind, Kind::forbidden);
  ::csi::v1::CreateVolumeResponse made;
  made.mutable_volume()->set_volume_id("ext-copy");
  controller.creates.script.push_back(FakeController::ok(made));
  auto allowed = run(lifecycle.create(of_nobody, op));
  ASSERT_TRUE(allowed) << allowed.error().message;
  EXPECT_EQ(controller.creates.requests.at(0).volume_content_source().volume().volume_id(), "ext-gone");
}

TEST_F(TenancyTest, TheIdHereWinsAndTheSnapshotNameResolvesToItsRecordedId) {
  // Team A's own volume by its id: the plugin gets its external id.
  ::csi::v1::CreateVolumeResponse made;
  made.mutable_volume()->set_volume_id("ext-copy");
  controller.creates.script.push_back(FakeController::ok(made));
  const auto by_id = in_team_a("copy", "a", ""), by_name = in_team_a("restored", "", "weekly");
  auto clone = run(lifecycle.create(by_id, team_a));
  ASSERT_TRUE(clone) << clone.error().message;
  EXPECT_EQ(controller.creates.requests.at(0).volume_content_source().volume().volume_id(), "ext-a");
  EXPECT_EQ(controller.creates.requests.at(0).name(), "team-a:copy");

  ::csi::v1::CreateSnapshotResponse taken;
  *taken.mutable_snapshot() = snap("snap-a", "ext-a");
  controller.snapshots.script.push_back(FakeController::ok(taken));
  auto plan = lifecycle.plan_snapshot({.ns = "team-a", .volume_id = "a", .name = "weekly"}, {});
  ASSERT_TRUE(plan);
  std::vector<volumes::SnapshotRequest> planned{*plan};
  ASSERT_EQ(run(lifecycle.create_snapshots(planned)).created.size(), 1u);
  made.mutable_volume()->set_volume_id("ext-restored");
  controller.creates.script.push_back(FakeController::ok(made));
  auto restored = run(lifecycle.create(by_name, team_a));
  ASSERT_TRUE(restored) << restored.error().message;
  EXPECT_EQ(controller.creates.requests.at(1).volume_content_source().snapshot().snapshot_id(), "snap-a");
  EXPECT_TRUE(controller.snapshot_lists.requests.empty());  // the record answered
}

}  // namespace mooring::controlplane
