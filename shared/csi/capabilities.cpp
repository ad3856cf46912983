// Capability parsing: a switch per CSI enum; values this build does not know are skipped so a
// plugin speaking a newer CSI minor version still fingerprints.
#include "shared/csi/capabilities.hpp"

namespace mooring::csi {

void apply_plugin_info(const ::csi::v1::GetPluginInfoResponse& resp, ::mooring::v1::PluginFingerprint& fp) {
  fp.set_provider(resp.name());
  fp.set_version(resp.vendor_version());
}

void apply_plugin_capabilities(const ::csi::v1::GetPluginCapabilitiesResponse& resp,
                               ::mooring::v1::PluginFingerprint& fp) {
  fp.set_requires_controller_plugin(false);
  fp.set_requires_topologies(false);
  fp.set_online_expansion(false);
  fp.set_offline_expansion(false);
  using Service = ::csi::v1::PluginCapability::Service;
  using Expansion = ::csi::v1::PluginCapability::VolumeExpansion;
  for (const auto& cap : resp.capabilities()) {
    if (cap.has_service()) {
      switch (cap.service().type()) {
        case Service::CONTROLLER_SERVICE: fp.set_requires_controller_plugin(true); break;
        case Service::VOLUME_ACCESSIBILITY_CONSTRAINTS: fp.set_requires_topologies(true); break;
        default: break;  // GROUP_CONTROLLER_SERVICE (has_group_controller) and newer
      }
    } else if (cap.has_volume_expansion()) {
      switch (cap.volume_expansion().type()) {
        case Expansion::ONLINE: fp.set_online_expansion(true); break;
        case Expansion::OFFLINE: fp.set_offline_expansion(true); break;
        default: break;
      }
    }
  }
}

::mooring::v1::ControllerInfo controller_info(const ::csi::v1::ControllerGetCapabilitiesResponse& resp) {
  ::mooring::v1::ControllerInfo info;
  using Type = ::csi::v1::ControllerServiceCapability::RPC;
  for (const auto& cap : resp.capabilities()) {
    if (!cap.has_rpc()) continue;
    switch (cap.rpc().type()) {
      case Type::CREATE_DELETE_VOLUME: info.set_supports_create_delete(true); break;
      case Type::PUBLISH_UNPUBLISH_VOLUME: info.set_supports_attach_detach(true); break;
      case Type::LIST_VOLUMES: info.set_supports_list_volumes(true); break;
      case Type::GET_CAPACITY: info.set_supports_get_capacity(true); break;
      case Type::CREATE_DELETE_SNAPSHOT: info.set_supports_create_delete_snapshot(true); break;
      case Type::LIST_SNAPSHOTS: info.set_supports_list_snapshots(true); break;
      case Type::CLONE_VOLUME: info.set_supports_clone(true); break;
      case Type::PUBLISH_READONLY: info.set_supports_read_only_attach(true); break;
      case Type::EXPAND_VOLUME: info.set_supports_expand(true); break;
      case Type::LIST_VOLUMES_PUBLISHED_NODES: info.set_supports_list_volumes_attached_nodes(true); break;
      case Type::VOLUME_CONDITION: info.set_supports_condition(true); break;
      case Type::GET_VOLUME: info.set_supports_get(true); break;
      case Type::MODIFY_VOLUME: info.set_supports_modify(true); break;
      case Type::GET_SNAPSHOT: info.set_supports_get_snapshot(true); break;
      default: break;  // SINGLE_NODE_MULTI_WRITER and newer
    }
  }
  return info;
}

bool has_group_controller(const ::csi::v1::GetPluginCapabilitiesResponse& resp) {
  for (const auto& cap : resp.capabilities())
    if (cap.has_service() && cap.service().type() == ::csi::v1::PluginCapability::Service::GROUP_CONTROLLER_SERVICE)
      return true;
  return false;
}

void apply_group_capabilities(const ::csi::v1::GroupControllerGetCapabilitiesResponse& resp,
                              ::mooring::v1::ControllerInfo& info) {
  info.set_supports_group_snapshot(false);
  using Type = ::csi::v1::GroupControllerServiceCapability::RPC;
  for (const auto& cap : resp.capabilities())
    if (cap.has_rpc() && cap.rpc().type() == Type::CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)
      info.set_supports_group_snapshot(true);
}

void apply_node_capabilities(const ::csi::v1::NodeGetCapabilitiesResponse& resp, ::mooring::v1::NodeInfo& info) {
  info.set_requires_node_stage_volume(false);
  info.set_supports_stats(false);
  info.set_supports_expand(false);
  info.set_supports_condition(false);
  info.set_supports_volume_mount_group(false);
  using Type = ::csi::v1::NodeServiceCapability::RPC;
  for (const auto& cap : resp.capabilities()) {
    if (!cap.has_rpc()) continue;
    switch (cap.rpc().type()) {
      case Type::STAGE_UNSTAGE_VOLUME: info.set_requires_node_stage_volume(true); break;
      case Type::GET_VOLUME_STATS: info.set_supports_stats(true); break;
      case Type::EXPAND_VOLUME: info.set_supports_expand(true); break;
      case Type::VOLUME_CONDITION: info.set_supports_condition(true); break;
      case Type::VOLUME_MOUNT_GROUP: info.set_supports_volume_mount_group(true); break;
      default: break;
    }
  }
}

domain::Expected<::mooring::v1::NodeInfo> node_info(std::string_view plugin_id,
                                                    const ::csi::v1::NodeGetInfoResponse& resp,
                                                    ::mooring::v1::NodeInfo base) {
  if (resp.node_id().empty()) {
    return domain::error("plugin \"" + std::string(plugin_id) +
                         "\": NodeGetInfo returned an empty node_id; controllers could not publish to this node");
  }
  base.set_csi_node_id(resp.node_id());
  base.set_max_volumes(resp.max_volumes_per_node() > 0 ? resp.max_volumes_per_node() : 0);
  base.mutable_accessible_topology()->clear();
  if (resp.has_accessible_topology()) {
    for (const auto& [key, value] : resp.accessible_topology().segments()) {
      (*base.mutable_accessible_topology())[key] = value;
    }
  }
  return base;
}

bool probe_ready(const ::csi::v1::ProbeResponse& resp) { return !resp.has_ready() || resp.ready().value(); }

}  // namespace mooring::csi
