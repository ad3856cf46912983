// Pins the CSI error table's intent for every RPC x status code (reference/csi-spec-facts.md).
#include "shared/csi/error_table.hpp"

#include <gtest/gtest.h>

#include <set>

namespace mooring::csi {
namespace {

using grpc::StatusCode;
using namespace std::chrono_literals;

const std::vector<StatusCode> kAllCodes = {
    StatusCode::OK,
    StatusCode::CANCELLED,
    StatusCode::UNKNOWN,
    StatusCode::INVALID_ARGUMENT,
    StatusCode::DEADLINE_EXCEEDED,
    StatusCode::NOT_FOUND,
    StatusCode::ALREADY_EXISTS,
    StatusCode::PERMISSION_DENIED,
    StatusCode::RESOURCE_EXHAUSTED,
    StatusCode::FAILED_PRECONDITION,
    StatusCode::ABORTED,
    StatusCode::OUT_OF_RANGE,
    StatusCode::UNIMPLEMENTED,
    StatusCode::INTERNAL,
    StatusCode::UNAVAILABLE,
    StatusCode::DATA_LOSS,
    StatusCode::UNAUTHENTICATED,
};

const std::set<Rpc> kIdentity = {Rpc::GetPluginInfo,       Rpc::GetPluginCapabilities, Rpc::Probe,
                                 Rpc::ControllerGetCapabilities, Rpc::NodeGetCapabilities,  Rpc::NodeGetInfo,
                                 Rpc::GroupControllerGetCapabilities};
const std::set<Rpc> kReleases = {Rpc::NodeUnpublishVolume, Rpc::NodeUnstageVolume, Rpc::ControllerUnpublishVolume,
                                 Rpc::DeleteVolume, Rpc::DeleteSnapshot, Rpc::DeleteVolumeGroupSnapshot};
const std::set<Rpc> kAcquires = {Rpc::CreateVolume, Rpc::ControllerPublishVolume, Rpc::NodeStageVolume,
                                 Rpc::NodePublishVolume, Rpc::CreateSnapshot, Rpc::CreateVolumeGroupSnapshot};
// Calls that change state on the storage side (the ones that can be left "uncertain").
std::set<Rpc> mutating() {
  std::set<Rpc> s = kReleases;
  s.insert(kAcquires.begin(), kAcquires.end());
  s.insert(Rpc::ControllerExpandVolume);
  s.insert(Rpc::NodeExpandVolume);
  s.insert(Rpc::ControllerModifyVolume);
  return s;
}

// The whole table, spelled out so a change to any cell is a visible diff. One letter per gRPC
// code in numeric order:
//   OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS
//   PERMISSION_DENIED RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE UNIMPLEMENTED
//   INTERNAL UNAVAILABLE DATA_LOSS UNAUTHENTICATED
// o = ok, i = ignorable, r = retry, u = uncertain, F = final_error.
const std::vector<std::pair<Rpc, std::string_view>> kExpectedTable = {
    {Rpc::GetPluginInfo, "orrFrFFrrFrFFrrFr"},
    {Rpc::GetPluginCapabilities, "orrFrFFrrFrFFrrFr"},
    {Rpc::Probe, "orrFrFFrrFrFFrrFr"},
    {Rpc::CreateVolume, "ourFurFruFuFFruFr"},
    {Rpc::DeleteVolume, "ourFuiFruruFFruFr"},
    {Rpc::ControllerPublishVolume, "ourFurFruruFFruFr"},
    {Rpc::ControllerUnpublishVolume, "ourFuiFruruFFruFr"},
    {Rpc::ValidateVolumeCapabilities, "orrFrrFrrFrFFrrFr"},
    {Rpc::ListVolumes, "orrFrFFrrFrFFrrFr"},
    {Rpc::GetCapacity, "orrFrFFrrFrFFrrFr"},
    {Rpc::ControllerGetCapabilities, "orrFrFFrrFrFFrrFr"},
    {Rpc::CreateSnapshot, "ourFurFrFFuFFruFr"},
    {Rpc::DeleteSnapshot, "ourFuiFruruFFruFr"},
    {Rpc::ListSnapshots, "orrFrFFrrFrFFrrFr"},
    {Rpc::ControllerExpandVolume, "ourFurFruruFFruFr"},
    {Rpc::ControllerGetVolume, "orrFrrFrrFrFFrrFr"},
    {Rpc::NodeStageVolume, "ourFurFruFuFFruFr"},
    {Rpc::NodeUnstageVolume, "ourFuiFruruFFruFr"},
    {Rpc::NodePublishVolume, "ourFurFruruFFruFr"},
    {Rpc::NodeUnpublishVolume, "ourFuiFruruFFruFr"},
    {Rpc::NodeGetVolumeStats, "orrFrrFrrFrFFrrFr"},
    {Rpc::NodeExpandVolume, "ourFurFruFuFFruFr"},
    {Rpc::NodeGetCapabilities, "orrFrFFrrFrFFrrFr"},
    {Rpc::NodeGetInfo, "orrFrFFrrFrFFrrFr"},
    {Rpc::GroupControllerGetCapabilities, "orrFrFFrrFrFFrrFr"},
    {Rpc::CreateVolumeGroupSnapshot, "ourFurFrFFuFFruFr"},
    {Rpc::DeleteVolumeGroupSnapshot, "ourFuiFruruFFruFr"},
    {Rpc::GetVolumeGroupSnapshot, "orrFrrFrrFrFFrrFr"},
    {Rpc::ControllerModifyVolume, "ourFurFruFuFFruFr"},
    {Rpc::GetSnapshot, "orrFrFFrrFrFFrrFr"},
};

Outcome from_letter(char c) {
  switch (c) {
    case 'o': return Outcome::ok;
    case 'i': return Outcome::ignorable;
    case 'r': return Outcome::retry;
    case 'u': return Outcome::uncertain;
    default: return Outcome::final_error;
  }
}

TEST(ErrorTable, EveryRpcAndCodeMatchesTheSpelledOutTable) {
  ASSERT_EQ(kExpectedTable.size(), all_rpcs().size());
  for (const auto& [rpc, row] : kExpectedTable) {
    ASSERT_EQ(row.size(), kAllCodes.size()) << to_string(rpc);
    for (std::size_t c = 0; c < row.size(); ++c) {
      EXPECT_EQ(classify(rpc, static_cast<StatusCode>(c)), from_letter(row[c]))
          << to_string(rpc) << " code " << c << " (" << explain(rpc, static_cast<StatusCode>(c)).why << ")";
    }
  }
}

TEST(ErrorTable, AllRpcsListsEveryRpcOnceInDeclarationOrder) {
  auto rpcs = all_rpcs();
  ASSERT_EQ(rpcs.size(), 30u);
  for (std::size_t i = 0; i < rpcs.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(rpcs[i]), i);
    EXPECT_EQ(policy(rpcs[i]).rpc, rpcs[i]);
  }
  std::set<std::string_view> names;
  for (Rpc rpc : rpcs) names.insert(to_string(rpc));
  EXPECT_EQ(names.size(), rpcs.size());
  EXPECT_EQ(to_string(Rpc::NodePublishVolume), "NodePublishVolume");
}

TEST(ErrorTable, EveryRpcHasATimeoutAndANote) {
  for (Rpc rpc : all_rpcs()) {
    const auto& p = policy(rpc);
    EXPECT_GT(p.timeout, 0ms) << to_string(rpc);
    EXPECT_LE(p.timeout, 2min) << to_string(rpc);
    EXPECT_FALSE(p.note.empty()) << to_string(rpc);
  }
}

TEST(ErrorTable, IdentityAndCapabilityCallsAreShortAndNeverRetried) {
  for (Rpc rpc : kIdentity) {
    EXPECT_FALSE(policy(rpc).retried) << to_string(rpc);
    EXPECT_LE(policy(rpc).timeout, 5s) << to_string(rpc);
    EXPECT_FALSE(policy(rpc).negation.has_value()) << to_string(rpc);
  }
}

TEST(ErrorTable, VolumeLifecycleCallsAreRetriedWithTwoMinuteAttempts) {
  for (Rpc rpc : mutating()) {
    EXPECT_TRUE(policy(rpc).retried) << to_string(rpc);
    EXPECT_EQ(policy(rpc).timeout, 2min) << to_string(rpc);
  }
}

TEST(ErrorTable, NegationsPairAcquiresWithTheirReleases) {
  EXPECT_EQ(policy(Rpc::CreateVolume).negation, Rpc::DeleteVolume);
  EXPECT_EQ(policy(Rpc::ControllerPublishVolume).negation, Rpc::ControllerUnpublishVolume);
  EXPECT_EQ(policy(Rpc::NodeStageVolume).negation, Rpc::NodeUnstageVolume);
  EXPECT_EQ(policy(Rpc::NodePublishVolume).negation, Rpc::NodeUnpublishVolume);
  EXPECT_EQ(policy(Rpc::CreateSnapshot).negation, Rpc::DeleteSnapshot);
  EXPECT_EQ(policy(Rpc::CreateVolumeGroupSnapshot).negation, Rpc::DeleteVolumeGroupSnapshot);
  for (Rpc rpc : all_rpcs()) {
    if (kAcquires.count(rpc) == 0) {
      EXPECT_FALSE(policy(rpc).negation.has_value()) << to_string(rpc);
    }
  }
}

TEST(ErrorTable, OkIsOkForEveryRpc) {
  for (Rpc rpc : all_rpcs()) EXPECT_EQ(classify(rpc, StatusCode::OK), Outcome::ok) << to_string(rpc);
}

TEST(ErrorTable, NotFoundOnAReleaseIsDoneNeverRetried) {
  for (Rpc rpc : kReleases) {
    EXPECT_EQ(classify(rpc, StatusCode::NOT_FOUND), Outcome::ignorable) << to_string(rpc);
    EXPECT_TRUE(is_done(classify(rpc, StatusCode::NOT_FOUND)));
  }
}

TEST(ErrorTable, NotFoundOnPublishOrStageIsRetried) {
  for (Rpc rpc : {Rpc::ControllerPublishVolume, Rpc::NodeStageVolume, Rpc::NodePublishVolume, Rpc::CreateVolume}) {
    EXPECT_EQ(classify(rpc, StatusCode::NOT_FOUND), Outcome::retry) << to_string(rpc);
  }
}

TEST(ErrorTable, NotFoundIsIgnorableOnlyForReleases) {
  for (Rpc rpc : all_rpcs()) {
    if (kReleases.count(rpc) == 0) {
      EXPECT_NE(classify(rpc, StatusCode::NOT_FOUND), Outcome::ignorable) << to_string(rpc);
    }
  }
}

TEST(ErrorTable, TimeoutsAndUnavailableAreUncertainForEveryMutatingCall) {
  for (Rpc rpc : mutating()) {
    for (StatusCode code : {StatusCode::DEADLINE_EXCEEDED, StatusCode::UNAVAILABLE, StatusCode::CANCELLED}) {
      EXPECT_EQ(classify(rpc, code), Outcome::uncertain) << to_string(rpc) << " code " << code;
    }
  }
}

TEST(ErrorTable, ResourceExhaustedIsUncertainExceptSnapshotWithoutSpace) {
  for (Rpc rpc : mutating()) {
    if (rpc == Rpc::CreateSnapshot || rpc == Rpc::CreateVolumeGroupSnapshot) continue;
    EXPECT_EQ(classify(rpc, StatusCode::RESOURCE_EXHAUSTED), Outcome::uncertain) << to_string(rpc);
  }
  EXPECT_EQ(classify(Rpc::CreateSnapshot, StatusCode::RESOURCE_EXHAUSTED), Outcome::final_error);
  EXPECT_EQ(classify(Rpc::CreateVolumeGroupSnapshot, StatusCode::RESOURCE_EXHAUSTED), Outcome::final_error);
}

TEST(ErrorTable, CallsWithoutSideEffectsAreNeverUncertain) {
  for (Rpc rpc : all_rpcs()) {
    if (mutating().count(rpc)) continue;
    for (StatusCode code : kAllCodes) {
      EXPECT_NE(classify(rpc, code), Outcome::uncertain) << to_string(rpc) << " code " << code;
    }
    EXPECT_EQ(classify(rpc, StatusCode::UNAVAILABLE), Outcome::retry) << to_string(rpc);
    EXPECT_EQ(classify(rpc, StatusCode::DEADLINE_EXCEEDED), Outcome::retry) << to_string(rpc);
  }
}

TEST(ErrorTable, EveryUncertainOutcomeIsRetriedByARetriedRpc) {
  for (Rpc rpc : all_rpcs()) {
    for (StatusCode code : kAllCodes) {
      if (classify(rpc, code) == Outcome::uncertain) {
        EXPECT_TRUE(policy(rpc).retried) << to_string(rpc);
        EXPECT_TRUE(should_retry(Outcome::uncertain));
      }
    }
  }
}

TEST(ErrorTable, AbortedIsUncertainForCallsWithSideEffects) {
  const auto muts = mutating();
  for (Rpc rpc : all_rpcs()) {
    const Outcome expected = muts.contains(rpc) ? Outcome::uncertain : Outcome::retry;
    EXPECT_EQ(classify(rpc, StatusCode::ABORTED), expected) << to_string(rpc);
  }
}

TEST(ErrorTable, PermissionErrorsAreRetriedSoAReleaseIsNeverDropped) {
  for (Rpc rpc : all_rpcs()) {
    EXPECT_EQ(classify(rpc, StatusCode::PERMISSION_DENIED), Outcome::retry) << to_string(rpc);
    EXPECT_EQ(classify(rpc, StatusCode::UNAUTHENTICATED), Outcome::retry) << to_string(rpc);
  }
}

TEST(ErrorTable, ReleasesRetryEverythingThatIsNotACallerBug) {
  const std::set<StatusCode> final_codes = {StatusCode::UNIMPLEMENTED, StatusCode::INVALID_ARGUMENT,
                                            StatusCode::ALREADY_EXISTS, StatusCode::OUT_OF_RANGE,
                                            StatusCode::DATA_LOSS};
  for (Rpc rpc : kReleases) {
    for (StatusCode code : kAllCodes) {
      const Outcome o = classify(rpc, code);
      if (final_codes.count(code)) {
        EXPECT_EQ(o, Outcome::final_error) << to_string(rpc) << " code " << code;
      } else {
        EXPECT_TRUE(is_done(o) || should_retry(o)) << to_string(rpc) << " code " << code << " -> " << to_string(o);
      }
    }
  }
}

TEST(ErrorTable, FailedPreconditionFollowsEachRpcsMeaning) {
  EXPECT_EQ(classify(Rpc::Probe, StatusCode::FAILED_PRECONDITION), Outcome::final_error);
  EXPECT_EQ(classify(Rpc::ControllerPublishVolume, StatusCode::FAILED_PRECONDITION), Outcome::retry);
  EXPECT_EQ(classify(Rpc::NodeExpandVolume, StatusCode::FAILED_PRECONDITION), Outcome::final_error);
  EXPECT_EQ(classify(Rpc::DeleteVolume, StatusCode::FAILED_PRECONDITION), Outcome::retry);
  EXPECT_EQ(classify(Rpc::DeleteSnapshot, StatusCode::FAILED_PRECONDITION), Outcome::retry);
  EXPECT_EQ(classify(Rpc::ControllerExpandVolume, StatusCode::FAILED_PRECONDITION), Outcome::retry);
  EXPECT_EQ(classify(Rpc::NodeStageVolume, StatusCode::FAILED_PRECONDITION), Outcome::final_error);
  EXPECT_EQ(classify(Rpc::NodePublishVolume, StatusCode::FAILED_PRECONDITION), Outcome::retry);
  EXPECT_EQ(classify(Rpc::ControllerUnpublishVolume, StatusCode::FAILED_PRECONDITION), Outcome::retry);
  // The group snapshot tables: "cannot snapshot these volumes together" is the caller's to fix; a
  // group in use resolves with time.
  EXPECT_EQ(classify(Rpc::CreateVolumeGroupSnapshot, StatusCode::FAILED_PRECONDITION), Outcome::final_error);
  EXPECT_EQ(classify(Rpc::DeleteVolumeGroupSnapshot, StatusCode::FAILED_PRECONDITION), Outcome::retry);
}

TEST(ErrorTable, InternalAndUnknownAreRetriedWithBackoff) {
  for (Rpc rpc : all_rpcs()) {
    EXPECT_EQ(classify(rpc, StatusCode::INTERNAL), Outcome::retry) << to_string(rpc);
    EXPECT_EQ(classify(rpc, StatusCode::UNKNOWN), Outcome::retry) << to_string(rpc);
  }
}

TEST(ErrorTable, EveryClassificationExplainsItselfConsistently) {
  for (Rpc rpc : all_rpcs()) {
    for (StatusCode code : kAllCodes) {
      const auto c = explain(rpc, code);
      EXPECT_EQ(c.outcome, classify(rpc, code));
      EXPECT_FALSE(c.why.empty()) << to_string(rpc) << " code " << code;
    }
  }
}

TEST(ErrorTable, OutcomeHelpers) {
  EXPECT_TRUE(should_retry(Outcome::retry));
  EXPECT_TRUE(should_retry(Outcome::uncertain));
  EXPECT_FALSE(should_retry(Outcome::final_error));
  EXPECT_FALSE(should_retry(Outcome::ignorable));
  EXPECT_TRUE(is_done(Outcome::ok));
  EXPECT_TRUE(is_done(Outcome::ignorable));
  EXPECT_FALSE(is_done(Outcome::uncertain));
  EXPECT_EQ(to_string(Outcome::final_error), "final_error");
}

}  // namespace
}  // namespace mooring::csi
