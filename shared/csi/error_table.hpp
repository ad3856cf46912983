// The CSI error table: for every CSI RPC Mooring calls, its timeout, whether it is ever retried,
// the call that negates it, and what each gRPC status code means for the caller
// (reference/csi-spec-facts.md, "Errors and what the caller does"). Pure data, no I/O.
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace grpc {
class Status;  // only referenced: the full header stays in the .cpp
}

namespace mooring::csi {

enum class Rpc {
  // Identity
  GetPluginInfo,
  GetPluginCapabilities,
  Probe,
  // Controller
  CreateVolume,
  DeleteVolume,
  ControllerPublishVolume,
  ControllerUnpublishVolume,
  ValidateVolumeCapabilities,
  ListVolumes,
  GetCapacity,
  ControllerGetCapabilities,
  CreateSnapshot,
  DeleteSnapshot,
  ListSnapshots,
  ControllerExpandVolume,
  ControllerGetVolume,
  // Node
  NodeStageVolume,
  NodeUnstageVolume,
  NodePublishVolume,
  NodeUnpublishVolume,
  NodeGetVolumeStats,
  NodeExpandVolume,
  NodeGetCapabilities,
  NodeGetInfo,
  // GroupController (CSI v1.9+)
  GroupControllerGetCapabilities,
  CreateVolumeGroupSnapshot,
  DeleteVolumeGroupSnapshot,
  GetVolumeGroupSnapshot,
  // CSI v1.12, appended so the earlier values keep their numbers
  ControllerModifyVolume,
  GetSnapshot,
};

// Every Rpc value, in declaration order (for tests and tables).
std::span<const Rpc> all_rpcs();
std::string_view to_string(Rpc rpc);  // "NodePublishVolume"

// The gRPC name of a status code ("UNAVAILABLE"); "UNKNOWN" for a value outside the enum. The one
// spelling every log line, API error and call log uses.
std::string_view code_name(grpc::StatusCode code);
// "UNAVAILABLE: <message>", or just the name when the message is empty.
std::string status_text(grpc::StatusCode code, std::string_view message);
std::string status_text(const grpc::Status& status);

// What the caller does with a status code from a given RPC.
enum class Outcome {
  ok,           // OK
  ignorable,    // the desired end state already holds (e.g. NOT_FOUND on an unpublish): treat as done
  retry,        // not done; nothing is in progress; retry with backoff (ABORTED, NOT_FOUND on publish, ...)
  uncertain,    // may still be in progress (DEADLINE_EXCEEDED, UNAVAILABLE, CANCELLED, RESOURCE_EXHAUSTED):
                // retry; if the caller gives up it MUST issue the negating call
  final_error,  // the request must change first (INVALID_ARGUMENT, ALREADY_EXISTS, UNIMPLEMENTED, ...)
};
std::string_view to_string(Outcome outcome);

struct RpcPolicy {
  Rpc rpc;
  std::chrono::milliseconds timeout;  // per attempt
  bool retried;                       // false: deliberately never retried (Probe, GetPluginInfo, capabilities)
  std::optional<Rpc> negation;        // the call that undoes it (NodePublish -> NodeUnpublish, ...)
  std::string_view note;              // why, for operators reading logs and for reviewers
};

const RpcPolicy& policy(Rpc rpc);
Outcome classify(Rpc rpc, grpc::StatusCode code);

// The outcome together with the reason, for logs and API errors ("NOT_FOUND on a release: ...").
// Calls without a negation (releases, expansion) still report `uncertain` for timeouts: the
// caller keeps retrying them, since there is nothing to undo but the end state is unknown.
struct Classification {
  Outcome outcome;
  std::string_view why;
};
Classification explain(Rpc rpc, grpc::StatusCode code);

// True for outcomes worth another attempt (retry, uncertain).
constexpr bool should_retry(Outcome o) { return o == Outcome::retry || o == Outcome::uncertain; }
// True when the end state holds (ok, ignorable).
constexpr bool is_done(Outcome o) { return o == Outcome::ok || o == Outcome::ignorable; }

}  // namespace mooring::csi
