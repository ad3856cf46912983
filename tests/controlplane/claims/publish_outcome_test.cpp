// Which ControllerPublish failures free the claim and which leave it for release with
// ControllerUnpublish.
#include "services/controlplane/claims/publish_outcome.hpp"

#include <gtest/gtest.h>

#include "tests/controlplane/support/fixtures.hpp"

namespace mooring::controlplane {

using grpc::StatusCode;

namespace {

const domain::Time t0 = domain::from_unix_ms(1'000'000);

domain::Volume claimed_volume() {
  auto v = fixtures::volume("vol-1");
  v.claims["a1"] = fixtures::claim("a1", "n1", domain::ClaimState::taken);
  v.claims["a1"].last_error = kPublishPending;
  v.access_mode = domain::AccessMode::single_node_writer;
  v.attachment_mode = domain::AttachmentMode::file_system;
  return v;
}

}  // namespace

TEST(PublishOutcome, NothingSentIsCertainWhateverTheCode) {
  for (auto code : {StatusCode::UNAVAILABLE, StatusCode::DEADLINE_EXCEEDED, StatusCode::INVALID_ARGUMENT}) {
    const auto f = classify_publish_failure(code, /*sent=*/false, /*retry_of_pending=*/false);
    EXPECT_TRUE(f.certain) << code;
    EXPECT_FALSE(f.rejected) << code;
  }
}

// The retry of a pending publish that reached no controller, with no controller's node up: an
// earlier attempt may have published before the control plane was killed, so the claim goes to
// release with ControllerUnpublish, never dropped.
TEST(PublishOutcome, NothingSentOnARetryOfAPendingPublishIsUncertain) {
  const auto f = classify_publish_failure(StatusCode::UNAVAILABLE, /*sent=*/false, /*retry_of_pending=*/true,
                                          /*unheard=*/false);
  EXPECT_FALSE(f.certain);
  EXPECT_FALSE(f.rejected);
  EXPECT_FALSE(f.kept);
}

// The same while a controller's node is up and no agent heard the call (the controller's agent
// restarting after a failover: none to ask, or none could be connected to): the claim keeps
// waiting and the agent's retry sends the same publish again, instead of an unpublish and a
// publish under a new id.
TEST(PublishOutcome, ARetryNoAgentHeardWhileAControllersNodeIsUpKeepsTheClaimWaiting) {
  for (bool sent : {false, true}) {
    const auto f = classify_publish_failure(StatusCode::UNAVAILABLE, sent, /*retry_of_pending=*/true,
                                            /*unheard=*/true);
    EXPECT_TRUE(f.kept) << sent;
    EXPECT_FALSE(f.certain) << sent;
  }
  // Not a first attempt (freed when surely not sent, released otherwise), nor a retry an agent
  // answered (a plugin may have acted: released as before).
  EXPECT_FALSE(classify_publish_failure(StatusCode::UNAVAILABLE, false, false, true).kept);
  EXPECT_TRUE(classify_publish_failure(StatusCode::UNAVAILABLE, false, false, true).certain);
  EXPECT_FALSE(classify_publish_failure(StatusCode::UNAVAILABLE, true, true, false).kept);
}

TEST(PublishOutcome, AFinalErrorOnTheFirstAttemptIsCertainAndPassedOn) {
  const auto f = classify_publish_failure(StatusCode::INVALID_ARGUMENT, true, false);
  EXPECT_EQ(f.outcome, csi::Outcome::final_error);
  EXPECT_TRUE(f.certain);
  EXPECT_TRUE(f.rejected);
}

TEST(PublishOutcome, AFinalErrorOnARetryOfAPendingPublishIsUncertain) {
  const auto f = classify_publish_failure(StatusCode::INVALID_ARGUMENT, true, true);
  EXPECT_FALSE(f.certain);
  EXPECT_FALSE(f.rejected);
}

TEST(PublishOutcome, TimeoutsAndUnavailableAreUncertain) {
  for (auto code : {StatusCode::DEADLINE_EXCEEDED, StatusCode::UNAVAILABLE, StatusCode::ABORTED}) {
    const auto f = classify_publish_failure(code, true, false);
    EXPECT_FALSE(f.certain) << code;
    EXPECT_FALSE(f.rejected) << code;
  }
}

TEST(PublishOutcome, ACertainFailureFreesTheClaim) {
  auto v = claimed_volume();
  record_publish_failure(v, "a1", classify_publish_failure(StatusCode::INVALID_ARGUMENT, true, false), "boom", t0);
  EXPECT_FALSE(v.claims.contains("a1"));
}

TEST(PublishOutcome, AnUncertainFailureLeavesTheClaimUnpublishingWithTheError) {
  auto v = claimed_volume();
  record_publish_failure(v, "a1", classify_publish_failure(StatusCode::DEADLINE_EXCEEDED, true, false), "boom", t0);
  ASSERT_TRUE(v.claims.contains("a1"));
  EXPECT_EQ(v.claims["a1"].state, domain::ClaimState::unpublishing);
  EXPECT_EQ(v.claims["a1"].last_error, "boom");
}

TEST(PublishOutcome, ASuccessStoresTheContextAndClearsThePendingMarker) {
  auto v = claimed_volume();
  EXPECT_TRUE(publish_pending(v.claims["a1"]));
  record_publish(v, "a1", {{"device", "/dev/x"}}, t0);
  EXPECT_FALSE(publish_pending(v.claims["a1"]));
  EXPECT_EQ(v.claims["a1"].publish_context.at("device"), "/dev/x");
  EXPECT_EQ(v.claims["a1"].update_time, t0);
}

// The claim path's half of the publish race rule (the release's half: ReleaseRulesTest). A new
// claim's publish to a node must not overtake a release there whose ControllerUnpublish is next
// (it would be undone by it, or refused beside it), nor one whose publication has the other
// readonly flag (refused beside it until it is detached).
TEST(PublishOutcome, AReleaseOnTheNodeWhoseDetachComesNextGoesBeforeANewClaimsPublish) {
  auto v = fixtures::volume("vol-1");
  v.claims["w"] = fixtures::claim("w", "n1", domain::ClaimState::node_detached);
  v.claims["w"].controller_publish = domain::ControllerPublish::sent;
  EXPECT_EQ(release_ahead_on_node(v, "n1", "r", /*read_only=*/true), &v.claims["w"]);
  EXPECT_EQ(release_ahead_on_node(v, "n1", "r", /*read_only=*/false), &v.claims["w"]);
  v.claims["w"].controller_publish = domain::ControllerPublish::unknown;  // recorded before it was kept
  EXPECT_EQ(release_ahead_on_node(v, "n1", "r", true), &v.claims["w"]);

  // Not ahead: another node, the claim itself, a release that needs no controller step, one
  // already detached from the controller, and a claim that still runs (taken).
  EXPECT_EQ(release_ahead_on_node(v, "n2", "r", true), nullptr);
  EXPECT_EQ(release_ahead_on_node(v, "n1", "w", true), nullptr);
  v.claims["w"].controller_publish = domain::ControllerPublish::not_needed;
  EXPECT_EQ(release_ahead_on_node(v, "n1", "r", true), nullptr);
  v.claims["w"].controller_publish = domain::ControllerPublish::sent;
  for (auto s :
       {domain::ClaimState::controller_detached, domain::ClaimState::ready_to_free, domain::ClaimState::taken}) {
    v.claims["w"].state = s;
    EXPECT_EQ(release_ahead_on_node(v, "n1", "r", true), nullptr) << domain::to_string(s);
  }
}

TEST(PublishOutcome, ABeginningReleaseIsAheadOnlyWhenItsPublicationHasTheOtherReadonlyFlag) {
  auto v = fixtures::volume("vol-1");
  v.claims["w"] = fixtures::claim("w", "n1", domain::ClaimState::unpublishing);  // a writer: read-write
  v.claims["w"].controller_publish = domain::ControllerPublish::sent;
  EXPECT_EQ(release_ahead_on_node(v, "n1", "r", /*read_only=*/true), &v.claims["w"]);
  // The same flag: the publish is the node's publication again, and the release leaves the
  // detach to the new claim (ReleaseRulesTest).
  EXPECT_EQ(release_ahead_on_node(v, "n1", "r", /*read_only=*/false), nullptr);
  v.claims["w"].mode = domain::ClaimMode::read;
  EXPECT_EQ(release_ahead_on_node(v, "n1", "r", true), nullptr);
  EXPECT_EQ(release_ahead_on_node(v, "n1", "r", false), &v.claims["w"]);
}

}  // namespace mooring::controlplane
