// Create and delete through a scripted controller: what is registered, what is undone in the
// background, and what a refusal leaves behind.
#include "tests/controlplane/volumes/lifecycle_fixture.hpp"
#include "tests/controlplane/support/running_plugins.hpp"

namespace mooring::controlplane {

namespace {

using grpc::StatusCode;
using Kind = volumes::Failure::Kind;

::csi::v1::CreateVolumeResponse created(const std::string& external_id, std::int64_t capacity = 1024) {
  ::csi::v1::CreateVolumeResponse r;
  r.mutable_volume()->set_volume_id(external_id);
  r.mutable_volume()->set_capacity_bytes(capacity);
  return r;
}

domain::Volume wanted(const std::string& id) {
  auto v = fixtures::volume(id);
  v.external_id.clear();
  return v;
}

using Deleted = FakeController::Rpc<::csi::v1::DeleteVolumeRequest, ::csi::v1::DeleteVolumeResponse>;
void answer_delete(Deleted& rpc, StatusCode code) {
  rpc.script.push_back(code == StatusCode::OK
                           ? FakeController::ok(::csi::v1::DeleteVolumeResponse{})
                           : FakeController::failed<::csi::v1::DeleteVolumeResponse>(csi::Rpc::DeleteVolume, code));
}

// A volume registered as register does it (with its plugin's provider), holding "ext-7".
void seed_other(StateStore& store) {
  auto other = fixtures::volume("other");
  other.external_id = "ext-7";
  other.provider = store.plugin("hostpath")->provider;
  ASSERT_FALSE(other.provider.empty());
  Batch batch;
  batch.put(other);
  ASSERT_TRUE(store.commit(std::move(batch)));
}

}  // namespace

TEST_F(VolumeLifecycleTest, CreateRegistersWhatThePluginMadeUnderTheVolumeIdAsName) {
  controller.creates.script.push_back(FakeController::ok(created("ext-7", 4096)));
  auto r = run(lifecycle.create(wanted("vol-1"), anyone));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(controller.creates.requests.size(), 1u);
  EXPECT_EQ(controller.creates.requests[0].name(), "vol-1");
  EXPECT_EQ(controller.creates.requests[0].secrets().at("password"), "hunter2");
  ASSERT_NE(store.volume("vol-1"), nullptr);
  EXPECT_EQ(store.volume("vol-1")->external_id, "ext-7");
  EXPECT_EQ(r->volumes.at(0).capacity, 4096);
}

TEST_F(VolumeLifecycleTest, AnUncertainCreateIsNegatedInTheBackgroundWithTheSameRequest) {
  controller.creates.script.push_back(
      FakeController::failed<::csi::v1::CreateVolumeResponse>(csi::Rpc::CreateVolume, StatusCode::DEADLINE_EXCEEDED));
  controller.creates.script.push_back(FakeController::ok(created("ext-late")));
  answer_delete(controller.deletes, StatusCode::OK);
  auto r = run(lifecycle.create(wanted("vol-1"), anyone));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::timeout);
  ASSERT_EQ(controller.creates.requests.size(), 2u);
  EXPECT_EQ(controller.creates.requests[1].name(), "vol-1");
  ASSERT_EQ(controller.deletes.requests.size(), 1u);
  EXPECT_EQ(controller.deletes.requests[0].volume_id(), "ext-late");
  EXPECT_EQ(store.volume("vol-1"), nullptr);
}

TEST_F(VolumeLifecycleTest, ACreateAnsweredWithAnotherVolumesExternalIdIsRefusedAndDeletesNothing) {
  ASSERT_NO_FATAL_FAILURE(seed_other(store));
  controller.creates.script.push_back(FakeController::ok(created("ext-7")));
  answer_delete(controller.deletes, StatusCode::OK);
  auto r = run(lifecycle.create(wanted("vol-1"), anyone));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_NE(r.error().message.find("already registered as volume \"other\""), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("\"ext-7\""), std::string::npos) << r.error().message;
  EXPECT_EQ(store.volume("vol-1"), nullptr);
  ASSERT_NE(store.volume("other"), nullptr);
  // Undoing the create would have deleted the other volume's storage.
  EXPECT_TRUE(controller.deletes.requests.empty());
}

TEST_F(VolumeLifecycleTest, AnUncertainCreateWhoseRetryNamesAnotherVolumesStorageIsNotDeleted) {
  ASSERT_NO_FATAL_FAILURE(seed_other(store));
  controller.creates.script.push_back(
      FakeController::failed<::csi::v1::CreateVolumeResponse>(csi::Rpc::CreateVolume, StatusCode::DEADLINE_EXCEEDED));
  controller.creates.script.push_back(FakeController::ok(created("ext-7")));
  answer_delete(controller.deletes, StatusCode::OK);  // what a wrong negation would be told
  auto r = run(lifecycle.create(wanted("vol-1"), anyone));
  ASSERT_FALSE(r);
  EXPECT_EQ(controller.creates.requests.size(), 2u);
  EXPECT_TRUE(controller.deletes.requests.empty());
  EXPECT_NE(store.volume("other"), nullptr);
}

TEST_F(VolumeLifecycleTest, ACloneOfAVolumeRegisteredHereSendsItsExternalIdAndKeepsTheIdGiven) {
  ASSERT_NO_FATAL_FAILURE(seed_other(store));
  controller.creates.script.push_back(FakeController::ok(created("ext-copy")));
  auto v = wanted("copy");
  v.clone_id = "other";
  auto r = run(lifecycle.create(v, anyone));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(controller.creates.requests.size(), 1u);
  EXPECT_EQ(controller.creates.requests[0].volume_content_source().volume().volume_id(), "ext-7");
  EXPECT_EQ(store.volume("copy")->clone_id, "other");
}

TEST_F(VolumeLifecycleTest, ACloneIdThatIsNotRegisteredHereGoesToThePluginAsItsOwnId) {
  controller.creates.script.push_back(FakeController::ok(created("ext-copy")));
  auto v = wanted("copy");
  v.clone_id = "ext-elsewhere";
  auto r = run(lifecycle.create(v, anyone));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(controller.creates.requests.at(0).volume_content_source().volume().volume_id(), "ext-elsewhere");
}

TEST_F(VolumeLifecycleTest, ACloneOfAnotherPluginsVolumeIsRefusedNamingBothAndCallsNoPlugin) {
  auto other = fixtures::volume("other");
  other.plugin_id = "ebs";
  Batch batch;
  batch.put(other);
  seed(std::move(batch));
  auto v = wanted("copy");
  v.clone_id = "other";
  auto r = run(lifecycle.create(v, anyone));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::invalid);
  EXPECT_NE(r.error().message.find("volume of plugin \"ebs\""), std::string::npos) << r.error().message;
  EXPECT_TRUE(controller.creates.requests.empty());
  EXPECT_EQ(store.volume("copy"), nullptr);
}

TEST_F(VolumeLifecycleTest, CreatingARegisteredVolumeIsAConflictAndCallsNoPlugin) {
  Batch batch;
  batch.put(fixtures::volume("vol-1"));
  seed(std::move(batch));
  auto r = run(lifecycle.create(wanted("vol-1"), anyone));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_TRUE(controller.creates.requests.empty());
}

// Issue 40: a plugin whose controller has not been fingerprinted yet (its agent just started and
// reported it before asking it) has not said whether it creates volumes: a retryable
// "unavailable" naming that, not a refusal telling the caller to register instead.
TEST_F(VolumeLifecycleTest, ACreateWhileTheControllersCapabilitiesAreNotKnownYetIsRetryableNotARefusal) {
  auto p = *store.plugin("hostpath");
  for (auto* map : {&p.controllers, &p.nodes})
    for (auto& [id, inst] : *map) {
      inst.controller_info.reset();
      inst.healthy = false;
      inst.health_description = "starting";
    }
  Batch batch;
  fixtures::put_running(batch, {p}, &store);
  seed(std::move(batch));
  auto r = run(lifecycle.create(wanted("vol-1"), anyone));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::unavailable);
  EXPECT_NE(r.error().message.find("has not reported its controller's capabilities yet"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("CREATE_DELETE_VOLUME"), std::string::npos) << r.error().message;
  EXPECT_TRUE(controller.creates.requests.empty());

  // Fingerprinted without the capability: now the refusal is true.
  for (auto* map : {&p.controllers, &p.nodes})
    for (auto& [id, inst] : *map) inst.controller_info = domain::ControllerInfo{};
  Batch again;
  fixtures::put_running(again, {p}, &store);
  seed(std::move(again));
  r = run(lifecycle.create(wanted("vol-1"), anyone));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::invalid);
  EXPECT_NE(r.error().message.find("has no controller that supports CREATE_DELETE_VOLUME"), std::string::npos);
}

TEST_F(VolumeLifecycleTest, ADeleteThePluginDidDeregistersTheVolume) {
  Batch batch;
  batch.put(fixtures::volume("vol-1"));
  seed(std::move(batch));
  answer_delete(controller.deletes, StatusCode::OK);
  auto r = run(lifecycle.remove("vol-1", {{"token", "from-header"}}));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(store.volume("vol-1"), nullptr);
  EXPECT_EQ(controller.deletes.requests.at(0).secrets().at("token"), "from-header");
}

TEST_F(VolumeLifecycleTest, ADeleteWithUnknownOutcomeKeepsTheMarkAndIsFinishedInTheBackground) {
  Batch batch;
  batch.put(fixtures::volume("vol-1"));
  seed(std::move(batch));
  answer_delete(controller.deletes, StatusCode::DEADLINE_EXCEEDED);
  answer_delete(controller.deletes, StatusCode::OK);
  auto r = run(lifecycle.remove("vol-1", {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::timeout);
  EXPECT_NE(r.error().message.find("stays marked as being deleted"), std::string::npos) << r.error().message;
  EXPECT_EQ(controller.deletes.requests.size(), 2u);
  EXPECT_EQ(store.volume("vol-1"), nullptr);
}

TEST_F(VolumeLifecycleTest, ARefusedDeleteClearsTheMark) {
  Batch batch;
  batch.put(fixtures::volume("vol-1"));
  seed(std::move(batch));
  answer_delete(controller.deletes, StatusCode::FAILED_PRECONDITION);
  auto r = run(lifecycle.remove("vol-1", {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  ASSERT_NE(store.volume("vol-1"), nullptr);
  EXPECT_FALSE(store.volume("vol-1")->deleting);
}

TEST_F(VolumeLifecycleTest, StartResumesTheDeletesMarkedBeforeARestart) {
  auto v = fixtures::volume("vol-1");
  v.deleting = true;
  Batch batch;
  batch.put(v);
  seed(std::move(batch));
  answer_delete(controller.deletes, StatusCode::OK);
  lifecycle.start();
  run_background();
  EXPECT_EQ(store.volume("vol-1"), nullptr);
  EXPECT_EQ(controller.deletes.requests.at(0).volume_id(), "ext-vol-1");
}

TEST_F(VolumeLifecycleTest, AVolumeInUseIsNotDeletedAndThePluginIsNotAsked) {
  auto v = fixtures::volume("vol-1");
  v.claims["a1"] = fixtures::claim("a1", "n1", domain::ClaimState::taken);
  Batch batch;
  batch.put(v);
  seed(std::move(batch));
  auto r = run(lifecycle.remove("vol-1", {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_TRUE(controller.deletes.requests.empty());
}

}  // namespace mooring::controlplane
