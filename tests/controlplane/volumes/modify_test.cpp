// Modify (ControllerModifyVolume) in the volumes room: the rules refuse before any plugin call;
// the call carries the volume's secrets, then the request's, serialized on the volume's key; every
// answer the plugin gives is recorded in LastModify, and only an applied one changes
// MutableParameters. And GetSnapshot, where the plugin has it, reads one snapshot's owner.
#include <nlohmann/json.hpp>

#include "tests/controlplane/volumes/lifecycle_fixture.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

namespace {

using Kind = volumes::Failure::Kind;
using grpc::StatusCode;

class ModifyTest : public VolumeLifecycleTest {
 protected:
  ModifyTest() {
    set_controller([](domain::ControllerInfo& c) { c.supports_modify = true; });
    auto v = fixtures::volume("vol-1");
    v.mutable_parameters = {{"tier", "standard"}, {"iops", "100"}};
    v.parameters = {{"pool", "a"}};
    Batch batch;
    batch.put(v);
    seed(std::move(batch));
  }

  template <class F>
  void set_controller(F change) {
    auto p = *store.plugin("hostpath");
    for (auto& [id, inst] : p.controllers) change(*inst.controller_info);
    Batch batch;
    fixtures::put_running(batch, {p}, &store);
    seed(std::move(batch));
  }

  const domain::Volume& stored() { return *store.volume("vol-1"); }

  static agentclient::AgentResult<::csi::v1::ControllerModifyVolumeResponse> applied() {
    return FakeController::ok(::csi::v1::ControllerModifyVolumeResponse{});
  }
  static agentclient::AgentResult<::csi::v1::ControllerModifyVolumeResponse> refused(StatusCode code) {
    return FakeController::failed<::csi::v1::ControllerModifyVolumeResponse>(csi::Rpc::ControllerModifyVolume, code,
                                                                             "plugin says no");
  }
};

}  // namespace

TEST_F(ModifyTest, AnAppliedModifySendsTheKeysWithTheVolumesSecretsAndRecordsThem) {
  controller.modifies.script.push_back(applied());
  auto r = run(lifecycle.modify("vol-1", {{"tier", "fast"}}, {{"token", "t"}}));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(controller.modifies.requests.size(), 1u);
  const auto& sent = controller.modifies.requests[0];
  EXPECT_EQ(sent.volume_id(), "ext-vol-1");
  EXPECT_EQ(sent.mutable_parameters().size(), 1u);
  EXPECT_EQ(sent.mutable_parameters().at("tier"), "fast");
  EXPECT_EQ(sent.secrets().at("password"), "hunter2");
  EXPECT_EQ(sent.secrets().at("token"), "t");
  EXPECT_EQ(controller.modify_keys, std::vector<std::string>{"vol-1"});  // the volume's lock
  EXPECT_EQ(stored().mutable_parameters.at("tier"), "fast");
  EXPECT_EQ(stored().mutable_parameters.at("iops"), "100");
  ASSERT_TRUE(stored().last_modify);
  EXPECT_EQ(stored().last_modify->state, domain::kModifyApplied);
  EXPECT_EQ(r->volumes.at(0).mutable_parameters.at("tier"), "fast");
}

TEST_F(ModifyTest, APluginRefusalIsRecordedAndChangesNoParameter) {
  controller.modifies.script.push_back(refused(StatusCode::INVALID_ARGUMENT));
  auto r = run(lifecycle.modify("vol-1", {{"iops", "5"}}, {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::invalid);
  EXPECT_EQ(stored().mutable_parameters.at("iops"), "100");
  ASSERT_TRUE(stored().last_modify);
  EXPECT_EQ(stored().last_modify->state, domain::kModifyFailed);
  EXPECT_EQ(stored().last_modify->parameters.at("iops"), "5");
  EXPECT_NE(stored().last_modify->error.find("plugin says no"), std::string::npos);
}

TEST_F(ModifyTest, ATimeoutIsRecordedAsUncertain) {
  controller.modifies.script.push_back(refused(StatusCode::DEADLINE_EXCEEDED));
  auto r = run(lifecycle.modify("vol-1", {{"iops", "5"}}, {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::timeout);
  ASSERT_TRUE(stored().last_modify);
  EXPECT_EQ(stored().last_modify->state, domain::kModifyUncertain);
  EXPECT_EQ(stored().mutable_parameters.at("iops"), "100");
}

TEST_F(ModifyTest, NoControllerToAskRecordsNothing) {
  auto r = run(lifecycle.modify("vol-1", {{"iops", "5"}}, {}));  // empty script: nothing sent
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::unavailable);
  EXPECT_FALSE(stored().last_modify);
}

TEST_F(ModifyTest, APluginWithoutModifyVolumeIsRefusedBeforeAnyCall) {
  set_controller([](domain::ControllerInfo& c) { c.supports_modify = false; });
  auto r = run(lifecycle.modify("vol-1", {{"tier", "fast"}}, {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::invalid);
  EXPECT_NE(r.error().message.find("MODIFY_VOLUME"), std::string::npos) << r.error().message;
  EXPECT_TRUE(controller.modifies.requests.empty());
  EXPECT_FALSE(stored().last_modify);
}

TEST_F(ModifyTest, AnImmutableKeyOrAReleaseUnderWayIsRefusedBeforeAnyCall) {
  auto immutable = run(lifecycle.modify("vol-1", {{"pool", "b"}}, {}));
  ASSERT_FALSE(immutable);
  EXPECT_EQ(immutable.error().kind, Kind::invalid);
  auto v = stored();
  v.claims["a1"] = fixtures::claim("a1", "n1", domain::ClaimState::unpublishing);
  Batch batch;
  batch.put(v);
  seed(std::move(batch));
  auto releasing = run(lifecycle.modify("vol-1", {{"tier", "fast"}}, {}));
  ASSERT_FALSE(releasing);
  EXPECT_EQ(releasing.error().kind, Kind::conflict);
  EXPECT_NE(releasing.error().message.find("\"a1\" is unpublishing"), std::string::npos);
  auto missing = run(lifecycle.modify(domain::volume_key("team-b", "vol-1"), {{"tier", "fast"}}, {}));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, Kind::not_found);
  EXPECT_TRUE(controller.modifies.requests.empty());
}

TEST_F(ModifyTest, MutableParametersAtCreateNeedAPluginThatCanModify) {
  auto v = fixtures::volume("vol-2");
  v.external_id.clear();
  v.mutable_parameters = {{"tier", "fast"}};
  ::csi::v1::CreateVolumeResponse made;
  made.mutable_volume()->set_volume_id("ext-vol-2");
  controller.creates.script.push_back(FakeController::ok(made));
  auto created = run(lifecycle.create(v, anyone));
  ASSERT_TRUE(created) << created.error().message;
  // A const request: on a mutable one, mutable_parameters() is the parameters field's mutable accessor.
  const auto& sent = controller.creates.requests.at(0);
  EXPECT_EQ(sent.mutable_parameters().at("tier"), "fast");
  EXPECT_EQ(store.volume("vol-2")->mutable_parameters.at("tier"), "fast");

  set_controller([](domain::ControllerInfo& c) { c.supports_modify = false; });
  v.id = v.name = "vol-3";
  auto refused = run(lifecycle.create(v, anyone));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, Kind::invalid);
  EXPECT_NE(refused.error().message.find("\"MutableParameters\""), std::string::npos) << refused.error().message;
  EXPECT_EQ(controller.creates.requests.size(), 1u);
}

TEST_F(ModifyTest, GetSnapshotReadsOneSnapshotsOwnerWhereThePluginHasIt) {
  set_controller([](domain::ControllerInfo& c) { c.supports_get_snapshot = c.supports_list_snapshots = true; });
  ::csi::v1::GetSnapshotResponse found;
  *found.mutable_snapshot() = FakeController::ready_snapshot("snap-1", "ext-vol-1");
  controller.snapshot_gets.script.push_back(FakeController::ok(found));
  controller.snapshot_deletes.script.push_back(FakeController::ok(::csi::v1::DeleteSnapshotResponse{}));
  const volumes::StringMap no_secrets;
  auto policy =
      acl::parse_policy(nlohmann::json::parse(R"({"Rules":{"Namespace":{"default":{"Policy":"write"}}}})"), "p");
  ASSERT_TRUE(policy) << policy.error();
  const volumes::Asker writer{.acl = acl::Acl::from_policies({&*policy}), .token = "t-default", .ns = "default"};
  auto r = run(lifecycle.delete_snapshot("hostpath", "snap-1", no_secrets, writer));
  ASSERT_TRUE(r) << r.error().message;  // its source is vol-1, the writer's namespace's
  ASSERT_EQ(controller.snapshot_gets.requests.size(), 1u);
  EXPECT_EQ(controller.snapshot_gets.requests[0].snapshot_id(), "snap-1");
  EXPECT_TRUE(controller.snapshot_lists.requests.empty());  // one read, not a listing
  EXPECT_EQ(controller.snapshot_deletes.requests.size(), 1u);

  // NOT_FOUND is an answer: nobody's snapshot, which a namespace's writer may not delete.
  controller.snapshot_gets.script.push_back(FakeController::failed<::csi::v1::GetSnapshotResponse>(
      csi::Rpc::GetSnapshot, StatusCode::NOT_FOUND, "no such snapshot"));
  auto nobody = run(lifecycle.delete_snapshot("hostpath", "snap-2", no_secrets, writer));
  ASSERT_FALSE(nobody);
  EXPECT_EQ(nobody.error().kind, Kind::forbidden);
  EXPECT_EQ(controller.snapshot_deletes.requests.size(), 1u);
}

}  // namespace mooring::controlplane
