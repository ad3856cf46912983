// Claims as objects in the volumes room: the list keeps what each filter asks (volume, node,
// allocation, namespace, state), each claim shows the step its release is at (the claim GC's own
// next decision); one claim's release moves it on in the usual order and wakes the GC, never
// frees it outright, and is refused while its allocation still runs on a live node.
#include "services/controlplane/volumes/claim_view.hpp"
#include "tests/controlplane/volumes/lifecycle_fixture.hpp"

namespace mooring::controlplane {

namespace {

using Kind = volumes::Failure::Kind;
using domain::ClaimState;

class ClaimObjectsTest : public VolumeLifecycleTest {
 protected:
  ClaimObjectsTest() {
    auto a = fixtures::volume("vol-a");
    a.claims["a1"] = fixtures::claim("a1", "n1", ClaimState::taken);
    a.claims["a2"] = fixtures::claim("a2", "n2", ClaimState::node_detached);
    auto b = fixtures::volume("vol-b");
    b.ns = "team-b";
    b.claims["b1"] = fixtures::claim("b1", "n1", ClaimState::taken);
    auto running = fixtures::allocation("a1", "n1");
    running.client_status = domain::ClientStatus::running;
    auto done = fixtures::allocation("b1", "n1");
    done.client_status = domain::ClientStatus::complete;
    done.desired_status = domain::DesiredStatus::stop;
    Batch batch;
    batch.put(a);
    batch.put(b);
    batch.put(running);
    batch.put(done);
    seed(std::move(batch));
  }

  std::vector<std::string> ids(const volumes::ClaimFilter& f) {
    std::vector<std::string> out;
    for (const auto& c : volumes::list_claims(store, f))
      out.push_back(volumes::claim_id(c.volume_id, c.claim.allocation_id));
    return out;
  }
};

}  // namespace

TEST_F(ClaimObjectsTest, EachFilterKeepsOnlyWhatItNames) {
  using V = std::vector<std::string>;
  EXPECT_EQ(ids({.ns = "*"}), (V{"vol-a:a1", "vol-a:a2", "vol-b:b1"}));
  EXPECT_EQ(ids({.ns = "default"}), (V{"vol-a:a1", "vol-a:a2"}));
  EXPECT_EQ(ids({.ns = "team-b"}), (V{"vol-b:b1"}));
  EXPECT_EQ(ids({.ns = "*", .node_id = "n1"}), (V{"vol-a:a1", "vol-b:b1"}));
  EXPECT_EQ(ids({.ns = "*", .allocation_id = "a2"}), (V{"vol-a:a2"}));
  EXPECT_EQ(ids({.ns = "*", .volume_id = "vol-b"}), (V{"vol-b:b1"}));
  EXPECT_EQ(ids({.ns = "*", .state = ClaimState::node_detached}), (V{"vol-a:a2"}));
  EXPECT_EQ(ids({.ns = "default", .volume_id = "vol-b"}), V{});  // another namespace's volume id
}

TEST_F(ClaimObjectsTest, EachClaimShowsTheStepItsReleaseIsAt) {
  auto taken = volumes::find_claim(store, "vol-a", "a1");
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->release_step, "in-use");
  auto detached = volumes::find_claim(store, "vol-a", "a2");
  ASSERT_TRUE(detached);
  // node-detached: the controller side is next (the fixture's plugin has a controller on n1).
  EXPECT_TRUE(detached->release_step == "unpublish-controller" || detached->release_step == "wait-for-controller" ||
              detached->release_step == "advance")
      << detached->release_step << ": " << detached->release_reason;
  EXPECT_FALSE(detached->release_reason.empty());
  EXPECT_FALSE(volumes::find_claim(store, "vol-a", "b1"));
  EXPECT_FALSE(volumes::find_claim(store, domain::volume_key("team-b", "vol-a"), "a1"));
}

TEST_F(ClaimObjectsTest, ClaimIdsAreVolumeThenAllocation) {
  std::string why;
  auto ref = volumes::parse_claim_id("vol-a[2]:a1", why);
  ASSERT_TRUE(ref) << why;
  EXPECT_EQ(ref->volume_id, "vol-a[2]");
  EXPECT_EQ(ref->allocation_id, "a1");
  EXPECT_FALSE(volumes::parse_claim_id("vol-a", why));
  EXPECT_NE(why.find("<volume id>:<allocation id>"), std::string::npos);
  EXPECT_FALSE(volumes::parse_claim_id("../x:a1", why));
  EXPECT_FALSE(volumes::parse_claim_id("vol-a:a/1", why));
}

TEST_F(ClaimObjectsTest, ReleasingAClaimMovesItOnInOrderAndWakesTheGc) {
  auto r = lifecycle.release_claim(domain::volume_key("team-b", "vol-b"), "b1");
  ASSERT_TRUE(r) << r.error().message;
  const auto& c = store.volume(domain::volume_key("team-b", "vol-b"))->claims.at("b1");
  EXPECT_EQ(c.state, ClaimState::unpublishing);  // the node step comes first: n1 is ready
  EXPECT_EQ(retried, std::vector<std::string>{domain::volume_key("team-b", "vol-b")});
}

TEST_F(ClaimObjectsTest, AClaimWhoseAllocationRunsOnALiveNodeIsNotReleased) {
  auto r = lifecycle.release_claim("vol-a", "a1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::conflict);
  EXPECT_NE(r.error().message.find("\"a1\""), std::string::npos) << r.error().message;
  EXPECT_EQ(store.volume("vol-a")->claims.at("a1").state, ClaimState::taken);
  EXPECT_TRUE(retried.empty());
}

TEST_F(ClaimObjectsTest, OnADownNodeTheNodeStepIsSkippedAndTheAllocationLost) {
  Batch batch;
  batch.put(node("n1", domain::NodeStatus::down));
  seed(std::move(batch));
  auto r = lifecycle.release_claim("vol-a", "a1");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(store.volume("vol-a")->claims.at("a1").state, ClaimState::node_detached);
  EXPECT_EQ(store.allocation("a1")->client_status, domain::ClientStatus::lost);
}

TEST_F(ClaimObjectsTest, AnUnknownClaimIsNotFound) {
  auto r = lifecycle.release_claim("vol-a", "zz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Kind::not_found);
  auto other = lifecycle.release_claim("vol-b", "b1");  // team B's volume asked for in default
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().kind, Kind::not_found);
}

}  // namespace mooring::controlplane
