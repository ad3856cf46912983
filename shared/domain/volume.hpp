// Domain: a CSI volume as Mooring records it — what the operator registered, what the plugin
// reported at create time, its claims, and fields the control plane derives for the API.
#pragma once

#include "shared/domain/claim.hpp"
#include "shared/domain/ids.hpp"
#include "shared/domain/modes.hpp"
#include "shared/domain/time.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::domain {

using StringMap = std::map<std::string, std::string>;

struct VolumeCapability {
  AccessMode access_mode = AccessMode::unknown;
  AttachmentMode attachment_mode = AttachmentMode::unknown;
  bool operator==(const VolumeCapability&) const = default;
};

struct MountOptions {
  std::string fs_type;
  std::vector<std::string> mount_flags;                              // may carry credentials: redacted in API output
  GroupChangePolicy group_change_policy = GroupChangePolicy::unset;  // the agent's fallback to VOLUME_MOUNT_GROUP
  bool empty() const {
    return fs_type.empty() && mount_flags.empty() && group_change_policy == GroupChangePolicy::unset;
  }
  bool operator==(const MountOptions&) const = default;
};

// The request's options win: its fs type when set, its flags when any (Nomad's Merge).
MountOptions merge_mount_options(const MountOptions& volume, const MountOptions& request);

struct Topology {
  StringMap segments;
  bool operator==(const Topology&) const = default;
};

struct TopologyRequest {
  std::vector<Topology> required;
  std::vector<Topology> preferred;
  bool empty() const { return required.empty() && preferred.empty(); }
  bool operator==(const TopologyRequest&) const = default;
};

// The last ControllerModifyVolume asked of a volume and how it ended, so a modify whose answer
// was lost (the plugin may have applied it) explains itself until the same request is sent again.
struct VolumeModification {
  StringMap parameters;  // the mutable parameters asked for
  std::string state;     // kModifyApplied, kModifyFailed or kModifyUncertain
  std::string error;     // the plugin's answer when not applied
  Time time{};
  bool operator==(const VolumeModification&) const = default;
};
inline constexpr std::string_view kModifyApplied = "applied";
inline constexpr std::string_view kModifyFailed = "failed";        // INVALID_ARGUMENT and the like: nothing applied
inline constexpr std::string_view kModifyUncertain = "uncertain";  // timeout/UNAVAILABLE/ABORTED: may be applied

// How refusals describe a volume marked `deleting` ("volume \"x\" " + kBeingDeleted + ...).
inline constexpr std::string_view kBeingDeleted = "is being deleted (DeleteVolume sent, not yet answered)";
inline constexpr std::string_view kBeingDeregistered =
    "is being deregistered (purge: its claims are released first, then it is removed)";

struct Volume {
  std::string ns{kDefaultNamespace};  // ids are unique per namespace; volume_key(ns, id) keys it
  std::string id;                     // Mooring id: URL segment and host path component (validated)
  std::string name;
  std::string plugin_id;
  std::string external_id;  // the provider's id: CSI volume_id in every RPC
  std::string provider;     // GetPluginInfo name of the plugin, recorded at register time
  std::string provider_version;

  std::vector<VolumeCapability> requested_capabilities;
  MountOptions mount_options;
  StringMap secrets;     // opaque; passed to the plugin, never in API output or logs
  StringMap parameters;  // opaque; immutable after register
  // CSI 1.12 mutable_parameters: given at create/register, changed only by a modify
  // (ControllerModifyVolume); their keys are the ones a modify may change.
  StringMap mutable_parameters;
  std::optional<VolumeModification> last_modify;
  StringMap context;  // volume_context from CreateVolume or the operator

  std::int64_t requested_capacity_min = 0;  // bytes; 0 = no minimum
  std::int64_t requested_capacity_max = 0;  // bytes; 0 = no limit
  std::int64_t capacity = 0;                // bytes reported by the plugin
  TopologyRequest requested_topologies;
  std::vector<Topology> topologies;  // where the volume is accessible (from the plugin)

  // Create-time content source (at most one): the provider's snapshot id or a volume to clone.
  std::string snapshot_id;
  std::string clone_id;

  // The modes of the current claims: set by the first claim, reset when the last is released.
  AccessMode access_mode = AccessMode::unknown;
  AttachmentMode attachment_mode = AttachmentMode::unknown;

  std::map<std::string, Claim> claims;  // keyed by allocation id; taken and past claims

  // A DeleteVolume was (or is about to be) sent and has not been answered with a final error:
  // the volume takes no new claim, since its storage may already be gone. Refusals say why with
  // kBeingDeleted.
  bool deleting = false;
  // DELETE /v1/volume/csi/:id?purge=true: its past claims are being released, and the volume is
  // deregistered in the same write that frees the last one. Takes no new claim or update.
  bool deregistering = false;

  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;

  // Derived by the control plane from the plugin when serving reads; not stored.
  bool schedulable = false;
  bool controller_required = false;
  int controllers_healthy = 0;
  int controllers_expected = 0;
  int nodes_healthy = 0;
  int nodes_expected = 0;

  bool operator==(const Volume&) const = default;
};

// Counts of taken (not past) claims by mode.
int current_readers(const Volume& v);
int current_writers(const Volume& v);
// True when the volume requests the given capability.
bool has_capability(const Volume& v, AccessMode access, AttachmentMode attachment);

}  // namespace mooring::domain
