// Wire: domain <-> mooring.v1 messages (control plane <-> node agent) and the mode enums'
// csi.v1 spellings. Conversions from the wire validate enums: an unknown/unset value is an
// error naming the field, never silently a default.
#pragma once

#include "csi/v1/csi.pb.h"
#include "mooring/v1/types.pb.h"
#include "shared/domain/allocation.hpp"
#include "shared/domain/modes.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::domain {

// ---- enums ----
::mooring::v1::AccessMode to_proto(AccessMode m);
::mooring::v1::AttachmentMode to_proto(AttachmentMode m);
::mooring::v1::ClaimMode to_proto(ClaimMode m);
::mooring::v1::ClaimState to_proto(ClaimState s);
::mooring::v1::DesiredStatus to_proto(DesiredStatus s);
::mooring::v1::ClientStatus to_proto(ClientStatus s);
::mooring::v1::PluginType to_proto(PluginType t);
// UNKNOWN maps to AccessMode::unknown / AttachmentMode::unknown; values outside the enum to nullopt.
std::optional<AccessMode> from_proto(::mooring::v1::AccessMode m);
std::optional<AttachmentMode> from_proto(::mooring::v1::AttachmentMode m);
// The UNSPECIFIED values and unknown numbers are nullopt.
std::optional<ClaimMode> from_proto(::mooring::v1::ClaimMode m);
std::optional<ClaimState> from_proto(::mooring::v1::ClaimState s);
std::optional<DesiredStatus> from_proto(::mooring::v1::DesiredStatus s);
std::optional<ClientStatus> from_proto(::mooring::v1::ClientStatus s);
std::optional<PluginType> from_proto(::mooring::v1::PluginType t);

using CsiAccessMode = ::csi::v1::VolumeCapability::AccessMode::Mode;
CsiAccessMode to_csi(AccessMode m);  // unknown -> UNKNOWN
// SINGLE_NODE_SINGLE_WRITER / SINGLE_NODE_MULTI_WRITER have no Nomad spelling: nullopt, as do
// UNKNOWN and unknown numbers.
std::optional<AccessMode> from_csi(CsiAccessMode m);

// ---- messages ----
::mooring::v1::MountOptions to_proto(const MountOptions& m);
MountOptions from_proto(const ::mooring::v1::MountOptions& m);

::mooring::v1::ControllerInfo to_proto(const ControllerInfo& c);
ControllerInfo from_proto(const ::mooring::v1::ControllerInfo& c);
::mooring::v1::NodeInfo to_proto(const NodeInfo& n);
NodeInfo from_proto(const ::mooring::v1::NodeInfo& n);

// PluginFingerprint <-> PluginInstance. node_id is not on the wire (it is the sender).
::mooring::v1::PluginFingerprint to_proto(const PluginInstance& i);
Expected<PluginInstance> from_proto(const ::mooring::v1::PluginFingerprint& fp, std::string_view node_id);

::mooring::v1::VolumeRequest to_proto(const VolumeRequest& r);
Expected<VolumeRequest> from_proto(const ::mooring::v1::VolumeRequest& r);

::mooring::v1::Task to_proto(const Task& t);
Expected<Task> from_proto(const ::mooring::v1::Task& t);

::mooring::v1::TaskEvent to_proto(const TaskEvent& e);
TaskEvent from_proto(const ::mooring::v1::TaskEvent& e);

::mooring::v1::NodeEvent to_proto(const NodeEvent& e);
NodeEvent from_proto(const ::mooring::v1::NodeEvent& e);

::mooring::v1::VolumeStats to_proto(const VolumeStatsReport& r);
VolumeStatsReport from_proto(const ::mooring::v1::VolumeStats& s);

// Allocation events are not on this message (they travel in status updates as TaskEvents).
::mooring::v1::Allocation to_proto(const Allocation& a);
Expected<Allocation> from_proto(const ::mooring::v1::Allocation& a);

// What a node needs to mount a claimed volume. `claim` supplies publish context and modes.
::mooring::v1::VolumeMountInfo mount_info(const Volume& v, const Claim& claim, bool read_only);

// The domain view of a mount info (secrets and contexts included).
struct VolumeMount {
  std::string volume_id;
  std::string external_id;
  std::string plugin_id;
  StringMap secrets;
  StringMap volume_context;
  StringMap publish_context;
  MountOptions mount_options;
  AccessMode access_mode = AccessMode::unknown;
  AttachmentMode attachment_mode = AttachmentMode::unknown;
  bool read_only = false;
  bool operator==(const VolumeMount&) const = default;
};
::mooring::v1::VolumeMountInfo to_proto(const VolumeMount& m);
Expected<VolumeMount> from_proto(const ::mooring::v1::VolumeMountInfo& m);

}  // namespace mooring::domain
