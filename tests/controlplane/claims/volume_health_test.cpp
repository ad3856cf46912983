// A node's volume stats folded into its claims: usage and condition per claim, events on the
// condition's transitions, and reports about claims that moved on dropped.
#include "services/controlplane/claims/volume_health.hpp"

#include <gtest/gtest.h>

#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane {
namespace {

using domain::ClaimState;

class VolumeHealthTest : public ::testing::Test {
 protected:
  VolumeHealthTest() {
    auto v = fixtures::volume("vol-1");
    v.claims["a1"] = fixtures::claim("a1", "n1", ClaimState::taken);
    v.claims["a2"] = fixtures::claim("a2", "n2", ClaimState::taken);
    v.claims["a3"] = fixtures::claim("a3", "n1", ClaimState::node_detached);
    volumes["vol-1"] = v;
  }
  VolumeHealthChange plan(const std::string& node, std::vector<domain::VolumeStatsReport> reports) {
    return plan_volume_stats(node, reports, [this](const std::string& key) -> const domain::Volume* {
      auto it = volumes.find(key);
      return it == volumes.end() ? nullptr : &it->second;
    });
  }
  // Stores what a plan changed, as the heartbeat's commit does.
  void apply(const VolumeHealthChange& c) {
    for (const auto& v : c.volumes) volumes[domain::volume_key(v.ns, v.id)] = v;
  }
  static domain::VolumeStatsReport report(std::string alloc, std::optional<bool> abnormal, std::int64_t used = 10) {
    domain::VolumeStatsReport r{.volume_id = "vol-1", .alloc_id = std::move(alloc)};
    r.usage = domain::VolumeUsage{.bytes_available = 90, .bytes_total = 100, .bytes_used = used};
    if (abnormal) r.condition = domain::VolumeCondition{*abnormal, *abnormal ? "disk on fire" : "mounted"};
    return r;
  }
  std::map<std::string, domain::Volume> volumes;
};

TEST_F(VolumeHealthTest, UsageAndConditionLandOnTheReportedClaimOnly) {
  auto c = plan("n1", {report("a1", false)});
  ASSERT_EQ(c.volumes.size(), 1u);
  EXPECT_TRUE(c.events.empty());  // first seen normal: nothing to tell
  const auto& claims = c.volumes[0].claims;
  ASSERT_TRUE(claims.at("a1").usage);
  EXPECT_EQ(claims.at("a1").usage->bytes_used, 10);
  ASSERT_TRUE(claims.at("a1").condition);
  EXPECT_FALSE(claims.at("a1").condition->abnormal);
  EXPECT_FALSE(claims.at("a2").usage);
}

TEST_F(VolumeHealthTest, TurningAbnormalAndBackRaisesOneEventEach) {
  apply(plan("n1", {report("a1", false)}));
  auto bad = plan("n1", {report("a1", true)});
  ASSERT_EQ(bad.events.size(), 1u);
  EXPECT_EQ(bad.events[0].type, "VolumeConditionAbnormal");
  EXPECT_EQ(bad.events[0].key, "vol-1");
  EXPECT_NE(bad.events[0].message.find("disk on fire"), std::string::npos) << bad.events[0].message;
  EXPECT_EQ(bad.events[0].details.at("alloc_id"), "a1");
  apply(bad);
  auto still = plan("n1", {report("a1", true, 20)});
  EXPECT_TRUE(still.events.empty());  // still abnormal: no new event, usage still follows
  EXPECT_EQ(still.volumes.size(), 1u);
  apply(still);
  auto good = plan("n1", {report("a1", false)});
  ASSERT_EQ(good.events.size(), 1u);
  EXPECT_EQ(good.events[0].type, "VolumeConditionNormal");
}

TEST_F(VolumeHealthTest, AbnormalAtTheFirstReportRaisesAnEvent) {
  EXPECT_EQ(plan("n1", {report("a1", true)}).events.size(), 1u);
}

TEST_F(VolumeHealthTest, ReportsAboutClaimsThatAreNotThisNodesOrNotTakenAreDropped) {
  EXPECT_TRUE(plan("n1", {report("a2", true)}).empty());  // a2 is n2's claim
  EXPECT_TRUE(plan("n1", {report("a3", true)}).empty());  // a3 is being released
  EXPECT_TRUE(plan("n1", {report("gone", true)}).empty());
  auto r = report("a1", true);
  r.volume_id = "no-such-volume";
  EXPECT_TRUE(plan("n1", {r}).empty());
}

TEST_F(VolumeHealthTest, TheSameReportAgainChangesNothing) {
  auto r = report("a1", false);
  apply(plan("n1", {r}));
  EXPECT_TRUE(plan("n1", {r}).empty());
}

}  // namespace
}  // namespace mooring::controlplane
