// The CSI error table. Every RPC's classification is written out per RPC kind below so a
// reviewer can check each one against reference/csi-spec-facts.md; `explain` carries the
// reason for each decision so logs can say why a call is retried or abandoned.
#include "shared/csi/error_table.hpp"

#include <grpcpp/support/status.h>

#include <array>
#include <iterator>
#include <stdexcept>

namespace mooring::csi {
namespace {

using namespace std::chrono_literals;
using grpc::StatusCode;

// Identity and capability calls answer from memory; a plugin that needs longer is unhealthy.
// 5 s matches Nomad's probe timeout (seed 002 gave Probe its own timeout).
constexpr std::chrono::milliseconds kIdentityTimeout = 5s;
// Volume lifecycle calls may attach cloud disks or format file systems. Nomad's client and
// the kubelet both give them 2 minutes per attempt; shorter attempts only produce more
// uncertain states, longer ones delay the retry that "continues where it left off".
constexpr std::chrono::milliseconds kVolumeTimeout = 2min;
// Read-only queries (list, capacity, stats) serve an operator or a periodic poll: 30 s is
// generous for a paged listing and short enough for an HTTP request to report the failure.
constexpr std::chrono::milliseconds kQueryTimeout = 30s;

constexpr std::array kAllRpcs = {
    Rpc::GetPluginInfo,
    Rpc::GetPluginCapabilities,
    Rpc::Probe,
    Rpc::CreateVolume,
    Rpc::DeleteVolume,
    Rpc::ControllerPublishVolume,
    Rpc::ControllerUnpublishVolume,
    Rpc::ValidateVolumeCapabilities,
    Rpc::ListVolumes,
    Rpc::GetCapacity,
    Rpc::ControllerGetCapabilities,
    Rpc::CreateSnapshot,
    Rpc::DeleteSnapshot,
    Rpc::ListSnapshots,
    Rpc::ControllerExpandVolume,
    Rpc::ControllerGetVolume,
    Rpc::NodeStageVolume,
    Rpc::NodeUnstageVolume,
    Rpc::NodePublishVolume,
    Rpc::NodeUnpublishVolume,
    Rpc::NodeGetVolumeStats,
    Rpc::NodeExpandVolume,
    Rpc::NodeGetCapabilities,
    Rpc::NodeGetInfo,
    Rpc::GroupControllerGetCapabilities,
    Rpc::CreateVolumeGroupSnapshot,
    Rpc::DeleteVolumeGroupSnapshot,
    Rpc::GetVolumeGroupSnapshot,
    Rpc::ControllerModifyVolume,
    Rpc::GetSnapshot,
};

// Indexed by the Rpc enum value; checked by the static_assert below and by the tests.
const RpcPolicy kPolicies[] = {
    {Rpc::GetPluginInfo, kIdentityTimeout, false, std::nullopt,
     "identity: never retried, the supervisor's next probe round is the retry; provider name and version"},
    {Rpc::GetPluginCapabilities, kIdentityTimeout, false, std::nullopt,
     "identity: never retried, the next fingerprint (30 s) is the retry"},
    {Rpc::Probe, kIdentityTimeout, false, std::nullopt,
     "health check with its own short timeout (seed 002); never retried, a failure marks the plugin "
     "unhealthy until the next probe; FAILED_PRECONDITION = unhealthy / missing dependency"},
    {Rpc::CreateVolume, kVolumeTimeout, true, Rpc::DeleteVolume,
     "idempotent on name; NOT_FOUND (source missing) and RESOURCE_EXHAUSTED (topology full) are "
     "retried; a timeout is uncertain and an abandoned create must be deleted"},
    {Rpc::DeleteVolume, kVolumeTimeout, true, std::nullopt,
     "NOT_FOUND = already deleted (done); FAILED_PRECONDITION = in use or has snapshots, retried"},
    {Rpc::ControllerPublishVolume, kVolumeTimeout, true, Rpc::ControllerUnpublishVolume,
     "NOT_FOUND (volume/node) and FAILED_PRECONDITION (published on another node) are retried with "
     "backoff; ALREADY_EXISTS (published incompatibly) is final; a timeout must be negated"},
    {Rpc::ControllerUnpublishVolume, kVolumeTimeout, true, std::nullopt,
     "a release is never dropped: NOT_FOUND = already detached (done); every other non-final code, "
     "including PERMISSION_DENIED and FAILED_PRECONDITION, is retried"},
    {Rpc::ValidateVolumeCapabilities, kQueryTimeout, true, std::nullopt,
     "read-only check at register/update, nothing to negate; NOT_FOUND and timeouts move on to the next "
     "healthy controller (NOT_FOUND stands when every one says it: 400 naming the external id); an empty "
     "`confirmed` is an answer (unsupported), not an error"},
    {Rpc::ListVolumes, kQueryTimeout, true, std::nullopt,
     "read-only passthrough; ABORTED = stale starting_token, restart the listing with an empty token"},
    {Rpc::GetCapacity, kQueryTimeout, true, std::nullopt, "read-only query"},
    {Rpc::ControllerGetCapabilities, kIdentityTimeout, false, std::nullopt,
     "capabilities: never retried, the next fingerprint (30 s) is the retry"},
    {Rpc::CreateSnapshot, kVolumeTimeout, true, Rpc::DeleteSnapshot,
     "idempotent on name; ALREADY_EXISTS (name conflict) final; RESOURCE_EXHAUSTED = no space, final "
     "per the spec; a timeout is uncertain and an abandoned snapshot must be deleted"},
    {Rpc::DeleteSnapshot, kVolumeTimeout, true, std::nullopt,
     "NOT_FOUND = already deleted (done); FAILED_PRECONDITION = in use, retried"},
    {Rpc::ListSnapshots, kQueryTimeout, true, std::nullopt,
     "read-only passthrough; ABORTED = stale starting_token, restart with an empty token"},
    {Rpc::ControllerExpandVolume, kVolumeTimeout, true, std::nullopt,
     "FAILED_PRECONDITION = published and no online expansion: retried after unpublish; OUT_OF_RANGE final"},
    {Rpc::ControllerGetVolume, kQueryTimeout, true, std::nullopt, "read-only query; NOT_FOUND retried"},
    {Rpc::NodeStageVolume, kVolumeTimeout, true, Rpc::NodeUnstageVolume,
     "NOT_FOUND retried; ALREADY_EXISTS (staged incompatibly) and FAILED_PRECONDITION (capability "
     "unsupported) final; a timeout must be negated by NodeUnstage"},
    {Rpc::NodeUnstageVolume, kVolumeTimeout, true, std::nullopt,
     "a release is never dropped: NOT_FOUND = already unstaged (done); everything not final is retried"},
    {Rpc::NodePublishVolume, kVolumeTimeout, true, Rpc::NodeUnpublishVolume,
     "NOT_FOUND and FAILED_PRECONDITION (not yet staged) retried; ALREADY_EXISTS final; a timeout "
     "must be negated by NodeUnpublish"},
    {Rpc::NodeUnpublishVolume, kVolumeTimeout, true, std::nullopt,
     "a release is never dropped: NOT_FOUND = already unmounted (done); everything not final is retried"},
    {Rpc::NodeGetVolumeStats, kQueryTimeout, false, std::nullopt, "polled periodically; the next poll is the retry"},
    {Rpc::NodeExpandVolume, kVolumeTimeout, true, std::nullopt,
     "FAILED_PRECONDITION = in use and cannot grow online: MUST NOT retry (final)"},
    {Rpc::NodeGetCapabilities, kIdentityTimeout, false, std::nullopt,
     "capabilities: never retried, the next fingerprint (30 s) is the retry"},
    {Rpc::NodeGetInfo, kIdentityTimeout, false, std::nullopt,
     "never retried, the next fingerprint (30 s) is the retry; an empty node_id is an error"},
    {Rpc::GroupControllerGetCapabilities, kIdentityTimeout, false, std::nullopt,
     "capabilities: never retried, the next fingerprint (30 s) is the retry"},
    {Rpc::CreateVolumeGroupSnapshot, kVolumeTimeout, true, Rpc::DeleteVolumeGroupSnapshot,
     "idempotent on name; ALREADY_EXISTS (name taken by other sources) and FAILED_PRECONDITION (these "
     "volumes cannot be snapshotted together) final; RESOURCE_EXHAUSTED = no space, final per the spec; "
     "NOT_FOUND (a source volume) retried; a timeout is uncertain and an abandoned group must be deleted"},
    {Rpc::DeleteVolumeGroupSnapshot, kVolumeTimeout, true, std::nullopt,
     "NOT_FOUND = already deleted (done; the spec wants OK); INVALID_ARGUMENT = snapshot_ids do not "
     "match the group, final; FAILED_PRECONDITION = in use, retried"},
    {Rpc::GetVolumeGroupSnapshot, kQueryTimeout, true, std::nullopt,
     "read-only query; NOT_FOUND retried (the group may not be visible yet); INVALID_ARGUMENT = "
     "snapshot_ids do not match the group"},
    {Rpc::ControllerModifyVolume, kVolumeTimeout, true, std::nullopt,
     "idempotent (the same mutable parameters again); INVALID_ARGUMENT = a parameter the plugin cannot "
     "change, nothing was applied (CSI 1.12), final; NOT_FOUND retried; a timeout is uncertain and the "
     "same request again settles it (there is nothing to negate)"},
    {Rpc::GetSnapshot, kQueryTimeout, true, std::nullopt,
     "read-only query of one snapshot; NOT_FOUND = no such snapshot, an answer (final)"},
};
static_assert(std::size(kPolicies) == kAllRpcs.size());

enum class Kind {
  identity,  // identity and capability calls: no side effect, no negation, never retried
  query,     // read-only controller/node queries
  acquire,   // create / publish / stage / snapshot: has a negating call
  release,   // delete / unpublish / unstage: the negating calls themselves; must not be dropped
  expand,    // changes the volume but has no negation
};

Kind kind_of(Rpc rpc) {
  switch (rpc) {
    case Rpc::GetPluginInfo:
    case Rpc::GetPluginCapabilities:
    case Rpc::Probe:
    case Rpc::ControllerGetCapabilities:
    case Rpc::NodeGetCapabilities:
    case Rpc::NodeGetInfo:
    case Rpc::GroupControllerGetCapabilities: return Kind::identity;
    case Rpc::ValidateVolumeCapabilities:
    case Rpc::ListVolumes:
    case Rpc::GetCapacity:
    case Rpc::ListSnapshots:
    case Rpc::ControllerGetVolume:
    case Rpc::NodeGetVolumeStats:
    case Rpc::GetVolumeGroupSnapshot:
    case Rpc::GetSnapshot: return Kind::query;
    case Rpc::CreateVolume:
    case Rpc::ControllerPublishVolume:
    case Rpc::CreateSnapshot:
    case Rpc::NodeStageVolume:
    case Rpc::NodePublishVolume:
    case Rpc::CreateVolumeGroupSnapshot: return Kind::acquire;
    case Rpc::DeleteVolume:
    case Rpc::ControllerUnpublishVolume:
    case Rpc::DeleteSnapshot:
    case Rpc::NodeUnstageVolume:
    case Rpc::NodeUnpublishVolume:
    case Rpc::DeleteVolumeGroupSnapshot: return Kind::release;
    case Rpc::ControllerExpandVolume:
    case Rpc::NodeExpandVolume:
    case Rpc::ControllerModifyVolume: return Kind::expand;
  }
  throw std::logic_error("csi::kind_of: unknown Rpc value");
}

Classification not_found(Rpc rpc) {
  switch (kind_of(rpc)) {
    case Kind::release:
      return {Outcome::ignorable, "NOT_FOUND on a release: the volume, node or mount is already gone"};
    case Kind::identity: return {Outcome::final_error, "NOT_FOUND is not a defined answer for an identity call"};
    case Kind::query:
      if (rpc == Rpc::ListVolumes || rpc == Rpc::ListSnapshots || rpc == Rpc::GetCapacity) {
        return {Outcome::final_error, "NOT_FOUND is not a defined answer for a listing"};
      }
      if (rpc == Rpc::GetSnapshot) return {Outcome::final_error, "NOT_FOUND on GetSnapshot: no such snapshot"};
      return {Outcome::retry, "NOT_FOUND: the volume may not be visible yet; retry with backoff"};
    case Kind::acquire:
    case Kind::expand: return {Outcome::retry, "NOT_FOUND (volume, node or source): retry with backoff"};
  }
  throw std::logic_error("csi::not_found: unknown kind");
}

Classification failed_precondition(Rpc rpc) {
  switch (rpc) {
    case Rpc::Probe:
      return {Outcome::final_error, "FAILED_PRECONDITION on Probe: plugin unhealthy or missing a dependency"};
    case Rpc::DeleteVolume:
      return {Outcome::retry, "FAILED_PRECONDITION on DeleteVolume: in use or has snapshots; retry with backoff"};
    case Rpc::ControllerPublishVolume:
      return {Outcome::retry,
              "FAILED_PRECONDITION on ControllerPublishVolume: published on another node; retry once "
              "it is unpublished there"};
    case Rpc::ControllerUnpublishVolume:
    case Rpc::NodeUnstageVolume:
    case Rpc::NodeUnpublishVolume:
      return {Outcome::retry,
              "FAILED_PRECONDITION on a release: resolves once the earlier step completes; a release is "
              "never dropped"};
    case Rpc::DeleteSnapshot:
      return {Outcome::retry, "FAILED_PRECONDITION on DeleteSnapshot: snapshot in use; retry with backoff"};
    case Rpc::DeleteVolumeGroupSnapshot:
      return {Outcome::retry,
              "FAILED_PRECONDITION on DeleteVolumeGroupSnapshot: group snapshot in use; retry with backoff"};
    case Rpc::CreateVolumeGroupSnapshot:
      return {Outcome::final_error,
              "FAILED_PRECONDITION on CreateVolumeGroupSnapshot: these volumes cannot be snapshotted together; "
              "the configuration must be fixed"};
    case Rpc::ControllerExpandVolume:
      return {Outcome::retry,
              "FAILED_PRECONDITION on ControllerExpandVolume: published and no online expansion; retry "
              "after unpublish"};
    case Rpc::NodePublishVolume:
      return {Outcome::retry, "FAILED_PRECONDITION on NodePublishVolume: not yet staged; retry with backoff"};
    case Rpc::NodeStageVolume:
      return {Outcome::final_error, "FAILED_PRECONDITION on NodeStageVolume: capability not supported by the volume"};
    case Rpc::NodeExpandVolume:
      return {Outcome::final_error,
              "FAILED_PRECONDITION on NodeExpandVolume: in use and cannot grow online; MUST NOT retry"};
    default: return {Outcome::final_error, "FAILED_PRECONDITION: the plugin refuses in the current state"};
  }
}

}  // namespace

std::span<const Rpc> all_rpcs() { return kAllRpcs; }

std::string_view to_string(Rpc rpc) {
  switch (rpc) {
    case Rpc::GetPluginInfo: return "GetPluginInfo";
    case Rpc::GetPluginCapabilities: return "GetPluginCapabilities";
    case Rpc::Probe: return "Probe";
    case Rpc::CreateVolume: return "CreateVolume";
    case Rpc::DeleteVolume: return "DeleteVolume";
    case Rpc::ControllerPublishVolume: return "ControllerPublishVolume";
    case Rpc::ControllerUnpublishVolume: return "ControllerUnpublishVolume";
    case Rpc::ValidateVolumeCapabilities: return "ValidateVolumeCapabilities";
    case Rpc::ListVolumes: return "ListVolumes";
    case Rpc::GetCapacity: return "GetCapacity";
    case Rpc::ControllerGetCapabilities: return "ControllerGetCapabilities";
    case Rpc::CreateSnapshot: return "CreateSnapshot";
    case Rpc::DeleteSnapshot: return "DeleteSnapshot";
    case Rpc::ListSnapshots: return "ListSnapshots";
    case Rpc::ControllerExpandVolume: return "ControllerExpandVolume";
    case Rpc::ControllerGetVolume: return "ControllerGetVolume";
    case Rpc::NodeStageVolume: return "NodeStageVolume";
    case Rpc::NodeUnstageVolume: return "NodeUnstageVolume";
    case Rpc::NodePublishVolume: return "NodePublishVolume";
    case Rpc::NodeUnpublishVolume: return "NodeUnpublishVolume";
    case Rpc::NodeGetVolumeStats: return "NodeGetVolumeStats";
    case Rpc::NodeExpandVolume: return "NodeExpandVolume";
    case Rpc::NodeGetCapabilities: return "NodeGetCapabilities";
    case Rpc::NodeGetInfo: return "NodeGetInfo";
    case Rpc::GroupControllerGetCapabilities: return "GroupControllerGetCapabilities";
    case Rpc::CreateVolumeGroupSnapshot: return "CreateVolumeGroupSnapshot";
    case Rpc::DeleteVolumeGroupSnapshot: return "DeleteVolumeGroupSnapshot";
    case Rpc::GetVolumeGroupSnapshot: return "GetVolumeGroupSnapshot";
    case Rpc::ControllerModifyVolume: return "ControllerModifyVolume";
    case Rpc::GetSnapshot: return "GetSnapshot";
  }
  return "UnknownRpc";
}

std::string_view to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::ok: return "ok";
    case Outcome::ignorable: return "ignorable";
    case Outcome::retry: return "retry";
    case Outcome::uncertain: return "uncertain";
    case Outcome::final_error: return "final_error";
  }
  return "unknown";
}

const RpcPolicy& policy(Rpc rpc) {
  const auto index = static_cast<std::size_t>(rpc);
  if (index >= std::size(kPolicies) || kPolicies[index].rpc != rpc) {
    throw std::logic_error("csi::policy: table out of order");
  }
  return kPolicies[index];
}

Classification explain(Rpc rpc, grpc::StatusCode code) {
  const Kind kind = kind_of(rpc);
  switch (code) {
    case StatusCode::OK: return {Outcome::ok, "OK"};
    case StatusCode::NOT_FOUND: return not_found(rpc);
    case StatusCode::FAILED_PRECONDITION: return failed_precondition(rpc);

    // Not final: the plugin may still be working on it (Kubernetes' "uncertain" set). Only calls
    // with a side effect can leave an uncertain state; for reads it is simply "try again".
    case StatusCode::CANCELLED:
    case StatusCode::DEADLINE_EXCEEDED:
    case StatusCode::UNAVAILABLE:
      if (kind == Kind::identity || kind == Kind::query) {
        return {Outcome::retry, "transport or timeout failure on a call without side effects"};
      }
      return {Outcome::uncertain, "timeout / unavailable / cancelled: the operation may still be in progress"};
    case StatusCode::RESOURCE_EXHAUSTED:
      if (rpc == Rpc::CreateSnapshot || rpc == Rpc::CreateVolumeGroupSnapshot) {
        return {Outcome::final_error, "RESOURCE_EXHAUSTED on a snapshot create: no space for the snapshot"};
      }
      if (kind == Kind::identity || kind == Kind::query) {
        return {Outcome::retry, "RESOURCE_EXHAUSTED on a call without side effects"};
      }
      return {Outcome::uncertain,
              "RESOURCE_EXHAUSTED: not final (capacity, attach limit or rate limit); may be in progress"};

    // An operation is pending for this volume. DESIGN.md counts ABORTED with the uncertain codes:
    // the pending operation may be an earlier attempt of this very call whose outcome we never
    // saw, so a caller that gives up must still negate it (repeating a negation is harmless).
    case StatusCode::ABORTED:
      if (kind == Kind::identity || kind == Kind::query) {
        return {Outcome::retry, "ABORTED on a call without side effects: retry with backoff"};
      }
      return {Outcome::uncertain, "ABORTED: an operation is pending for this volume; may be in progress"};

    // The spec: fix permissions or secrets, then retry. An operator fixes the secrets; a release
    // must never be dropped, and an acquire waiting on a fix is visible in the claim's LastError.
    case StatusCode::PERMISSION_DENIED:
    case StatusCode::UNAUTHENTICATED:
      return {Outcome::retry, "PERMISSION_DENIED / UNAUTHENTICATED: retried until an operator fixes secrets"};

    case StatusCode::UNIMPLEMENTED:
      return {Outcome::final_error, "UNIMPLEMENTED: MUST NOT retry; re-query capabilities"};
    case StatusCode::INVALID_ARGUMENT: return {Outcome::final_error, "INVALID_ARGUMENT: the request must be fixed"};
    case StatusCode::ALREADY_EXISTS:
      return {Outcome::final_error, "ALREADY_EXISTS: exists with incompatible parameters; the request must be fixed"};
    case StatusCode::OUT_OF_RANGE:
      return {Outcome::final_error, "OUT_OF_RANGE: unsupported capacity; the request must be fixed"};
    case StatusCode::DATA_LOSS: return {Outcome::final_error, "DATA_LOSS: unrecoverable; needs an operator"};

    // Undefined by the spec for every RPC: a plugin bug or a transient failure. Kubernetes treats
    // them as "not in progress" and retries with backoff; so do we.
    case StatusCode::UNKNOWN:
    case StatusCode::INTERNAL: return {Outcome::retry, "UNKNOWN / INTERNAL: plugin error, retried with backoff"};

    default: return {Outcome::final_error, "status code outside the gRPC set"};
  }
}

Outcome classify(Rpc rpc, grpc::StatusCode code) { return explain(rpc, code).outcome; }

std::string_view code_name(grpc::StatusCode code) {
  static constexpr std::string_view kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  const auto index = static_cast<std::size_t>(code);
  return index < std::size(kNames) ? kNames[index] : "UNKNOWN";
}

std::string status_text(grpc::StatusCode code, std::string_view message) {
  std::string out(code_name(code));
  if (!message.empty()) {
    out += ": ";
    out += message;
  }
  return out;
}

std::string status_text(const grpc::Status& status) { return status_text(status.error_code(), status.error_message()); }

}  // namespace mooring::csi
