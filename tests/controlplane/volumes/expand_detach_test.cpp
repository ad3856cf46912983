// Expansion, operator detach, snapshots and how a plugin's answer becomes a failure kind.
#include "services/controlplane/volumes/outcome.hpp"
#include "tests/controlplane/volumes/lifecycle_fixture.hpp"

namespace mooring::controlplane {

namespace {

using grpc::StatusCode;
using Kind = volumes::Failure::Kind;

}  // namespace

TEST_F(VolumeLifecycleTest, ExpansionGrowsOnTheControllerThenOnTheNodeThatPublishedIt) {
  auto v = fixtures::volume("vol-1");
  v.capacity = 100;
  v.claims["a1"] = fixtures::claim("a1", "n1", domain::ClaimState::taken);
  Batch batch;
  batch.put(v);
  batch.put(fixtures::allocation("a1", "n1"));
  seed(std::move(batch));
  ::csi::v1::ControllerExpandVolumeResponse grown;
  grown.set_capacity_bytes(500);
  grown.set_node_expansion_required(true);
  controller.expands.script.push_back(FakeController::ok(grown));
  controller.node_expands.script.push_back(FakeController::ok(v1::NodeExpandVolumeResponse{}));
  auto wanted = fixtures::volume("vol-1");
  wanted.requested_capacity_min = 500;
  auto r = run(lifecycle.register_or_expand(wanted, volumes::StringMap{{"token", "t"}}, anyone));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->volumes.at(0).capacity, 500);
  EXPECT_EQ(controller.expands.requests.at(0).secrets().at("token"), "t");
  EXPECT_EQ(controller.expanded_nodes, std::vector<std::string>{"n1"});
}

TEST_F(VolumeLifecycleTest, ARegistrationThatDoesNotGrowTheVolumeCallsNoPlugin) {
  Batch batch;
  batch.put(fixtures::volume("vol-1"));
  seed(std::move(batch));
  auto wanted = fixtures::volume("vol-1");
  auto r = run(lifecycle.register_or_expand(wanted, domain::error("header X-Mooring-CSI-Secrets: entry 1"), anyone));
  ASSERT_TRUE(r) << r.error().message;  // the header is only read for an expansion
  EXPECT_TRUE(controller.expands.requests.empty());
}

TEST_F(VolumeLifecycleTest, DetachFromADownNodeMarksItsAllocationLostAndWakesTheClaimGc) {
  auto v = fixtures::volume("vol-1");
  v.claims["a2"] = fixtures::claim("a2", "n2", domain::ClaimState::taken);
  auto alloc = fixtures::allocation("a2", "n2");
  alloc.client_status = domain::ClientStatus::running;
  Batch batch;
  batch.put(node("n2", domain::NodeStatus::down));
  batch.put(alloc);
  batch.put(v);
  seed(std::move(batch));
  auto r = lifecycle.detach("vol-1", "n2");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->claims.at(0).state, domain::ClaimState::node_detached);
  EXPECT_EQ(store.allocation("a2")->client_status, domain::ClientStatus::lost);
  EXPECT_EQ(retried, std::vector<std::string>{"vol-1"});
}

TEST_F(VolumeLifecycleTest, DetachRefusesWhileAnAllocationStillRunsOnALiveNode) {
  auto v = fixtures::volume("vol-1");
  v.claims["a1"] = fixtures::claim("a1", "n1", domain::ClaimState::taken);
  Batch batch;
  batch.put(fixtures::allocation("a1", "n1"));
  batch.put(v);
  seed(std::move(batch));
  auto r = lifecycle.detach("vol-1", "n1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_TRUE(retried.empty());
}

TEST_F(VolumeLifecycleTest, SnapshotsAreAnsweredPerItem) {
  Batch batch;
  batch.put(fixtures::volume("vol-1"));
  seed(std::move(batch));
  ::csi::v1::CreateSnapshotResponse made;
  made.mutable_snapshot()->set_snapshot_id("snap-1");
  made.mutable_snapshot()->set_source_volume_id("ext-vol-1");
  controller.snapshots.script.push_back(FakeController::ok(made));
  controller.snapshots.script.push_back(
      FakeController::failed<::csi::v1::CreateSnapshotResponse>(csi::Rpc::CreateSnapshot, StatusCode::INVALID_ARGUMENT));
  std::vector<volumes::SnapshotRequest> planned;
  for (const char* name : {"first", "second"}) {
    auto plan = lifecycle.plan_snapshot({.volume_id = "vol-1", .name = name}, {{"token", "h"}});
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->external_id, "ext-vol-1");
    EXPECT_EQ(plan->secrets.at("password"), "hunter2");
    planned.push_back(*plan);
  }
  auto done = run(lifecycle.create_snapshots(planned));
  ASSERT_EQ(done.created.size(), 1u);
  EXPECT_EQ(done.created[0].source_volume_id, "vol-1");
  ASSERT_EQ(done.errors.size(), 1u);
  EXPECT_EQ(done.errors[0].name, "second");
  EXPECT_EQ(done.errors[0].failure.kind, Kind::invalid);
}

TEST(VolumeOutcome, APluginFailureKeepsItsMeaningAndNothingAskedIsUnavailable) {
  agentclient::AgentResult<int> r;
  r.status = grpc::Status(StatusCode::FAILED_PRECONDITION, "in use");
  r.error = "DeleteVolume: in use";
  EXPECT_EQ(volumes::plugin_failure(r).kind, Kind::conflict);
  EXPECT_EQ(volumes::plugin_failure(r).message, "DeleteVolume: in use");
  r.no_target = true;
  EXPECT_EQ(volumes::plugin_failure(r, "none").kind, Kind::unavailable);
  EXPECT_EQ(volumes::kind_of(StatusCode::INTERNAL), Kind::plugin_error);
  EXPECT_EQ(volumes::from_refusal(unavailable("no instance")).kind, Kind::conflict);
}

}  // namespace mooring::controlplane
