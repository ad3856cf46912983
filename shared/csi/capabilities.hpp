// CSI capability parsing: turns a plugin's identity, capability and node-info answers into the
// fingerprint fields Mooring reports (mooring.v1.PluginFingerprint / ControllerInfo / NodeInfo).
// Pure functions, no I/O; unknown enum values (newer plugins) are ignored, never an error.
#pragma once

#include "csi/v1/csi.pb.h"
#include "mooring/v1/types.pb.h"
#include "shared/domain/result.hpp"

#include <string>
#include <string_view>

namespace mooring::csi {

// GetPluginInfo: name -> provider, vendor_version -> version.
void apply_plugin_info(const ::csi::v1::GetPluginInfoResponse& resp, ::mooring::v1::PluginFingerprint& fp);

// GetPluginCapabilities: CONTROLLER_SERVICE -> requires_controller_plugin,
// VOLUME_ACCESSIBILITY_CONSTRAINTS -> requires_topologies, ONLINE/OFFLINE -> *_expansion.
// Fields not mentioned by the response are reset to false (a fresh answer replaces the old).
void apply_plugin_capabilities(const ::csi::v1::GetPluginCapabilitiesResponse& resp,
                               ::mooring::v1::PluginFingerprint& fp);

// ControllerGetCapabilities -> ControllerInfo (every Supports* flag).
::mooring::v1::ControllerInfo controller_info(const ::csi::v1::ControllerGetCapabilitiesResponse& resp);

// GROUP_CONTROLLER_SERVICE among the plugin capabilities: the plugin serves the GroupController
// service, so GroupControllerGetCapabilities may be asked.
bool has_group_controller(const ::csi::v1::GetPluginCapabilitiesResponse& resp);
// GroupControllerGetCapabilities: CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT -> supports_group_snapshot.
void apply_group_capabilities(const ::csi::v1::GroupControllerGetCapabilitiesResponse& resp,
                              ::mooring::v1::ControllerInfo& info);

// NodeGetCapabilities: STAGE_UNSTAGE -> requires_node_stage_volume, GET_VOLUME_STATS -> supports_stats,
// EXPAND_VOLUME -> supports_expand, VOLUME_CONDITION -> supports_condition,
// VOLUME_MOUNT_GROUP -> supports_volume_mount_group. Leaves the NodeGetInfo
// fields (csi_node_id, max_volumes, topology) untouched.
void apply_node_capabilities(const ::csi::v1::NodeGetCapabilitiesResponse& resp, ::mooring::v1::NodeInfo& info);

// NodeGetInfo -> csi_node_id, max_volumes (0 = unlimited; negative values are treated as 0),
// accessible_topology. An empty node_id is an error naming the plugin: without it no controller
// can publish to this node. Capability fields of `base` are kept.
domain::Expected<::mooring::v1::NodeInfo> node_info(std::string_view plugin_id,
                                                    const ::csi::v1::NodeGetInfoResponse& resp,
                                                    ::mooring::v1::NodeInfo base = {});

// Probe: an unset `ready` means ready (CSI: "the plugin is ready" when absent).
bool probe_ready(const ::csi::v1::ProbeResponse& resp);

}  // namespace mooring::csi
