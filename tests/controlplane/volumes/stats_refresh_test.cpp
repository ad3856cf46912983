// Volume stats on demand: the claims' nodes are asked now and their answers recorded per claim.
#include "shared/wire/proto_convert.hpp"
#include "tests/controlplane/volumes/lifecycle_fixture.hpp"

namespace mooring::controlplane {

namespace {

v1::NodeVolumeStatsResponse answer(const std::string& alloc, bool abnormal) {
  domain::VolumeStatsReport r{.volume_id = "vol-1", .alloc_id = alloc};
  r.usage = domain::VolumeUsage{.bytes_available = 70, .bytes_total = 100, .bytes_used = 30};
  r.condition = domain::VolumeCondition{abnormal, abnormal ? "disk on fire" : "mounted"};
  v1::NodeVolumeStatsResponse out;
  *out.add_stats() = domain::to_proto(r);
  return out;
}

}  // namespace

TEST_F(VolumeLifecycleTest, RefreshAsksEveryNodeWithATakenClaimAndRecordsTheAnswers) {
  auto v = fixtures::volume("vol-1");
  v.claims["a1"] = fixtures::claim("a1", "n1", domain::ClaimState::taken);
  v.claims["a2"] = fixtures::claim("a2", "n2", domain::ClaimState::taken);
  v.claims["a3"] = fixtures::claim("a3", "n3", domain::ClaimState::node_detached);
  Batch batch;
  batch.put(v);
  seed(std::move(batch));
  controller.node_stats.script.push_back(FakeController::ok(answer("a1", true)));
  controller.node_stats.script.push_back(FakeController::failed<v1::NodeVolumeStatsResponse>(
      csi::Rpc::NodeGetVolumeStats, grpc::StatusCode::UNAVAILABLE));
  auto r = run(lifecycle.refresh_stats("vol-1"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(controller.stats_nodes, (std::vector<std::string>{"n1", "n2"}));  // not n3: released
  EXPECT_EQ(controller.node_stats.requests.at(0).volume_id(), "vol-1");
  const auto& claims = store.volume("vol-1")->claims;
  ASSERT_TRUE(claims.at("a1").usage);
  EXPECT_EQ(claims.at("a1").usage->bytes_used, 30);
  ASSERT_TRUE(claims.at("a1").condition);
  EXPECT_TRUE(claims.at("a1").condition->abnormal);
  EXPECT_FALSE(claims.at("a2").usage);  // n2 did not answer: nothing recorded
  ASSERT_FALSE(store.events().empty());
  EXPECT_EQ(store.events().back().type, "VolumeConditionAbnormal");
}

TEST_F(VolumeLifecycleTest, RefreshOfAnUnknownVolumeIsNotFound) {
  auto r = run(lifecycle.refresh_stats("nope"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, volumes::Failure::Kind::not_found);
}

}  // namespace mooring::controlplane
