// Wire: a plugin's fingerprint (its controller and node halves) <-> mooring.v1.
#include "shared/wire/proto_convert.hpp"
#include "shared/wire/proto_convert_parts.hpp"

namespace mooring::domain {

namespace v1 = ::mooring::v1;

v1::ControllerInfo to_proto(const ControllerInfo& c) {
  v1::ControllerInfo out;
  out.set_supports_create_delete(c.supports_create_delete);
  out.set_supports_attach_detach(c.supports_attach_detach);
  out.set_supports_list_volumes(c.supports_list_volumes);
  out.set_supports_get_capacity(c.supports_get_capacity);
  out.set_supports_create_delete_snapshot(c.supports_create_delete_snapshot);
  out.set_supports_list_snapshots(c.supports_list_snapshots);
  out.set_supports_clone(c.supports_clone);
  out.set_supports_read_only_attach(c.supports_read_only_attach);
  out.set_supports_expand(c.supports_expand);
  out.set_supports_list_volumes_attached_nodes(c.supports_list_volumes_attached_nodes);
  out.set_supports_condition(c.supports_condition);
  out.set_supports_get(c.supports_get);
  out.set_supports_group_snapshot(c.supports_group_snapshot);
  out.set_supports_modify(c.supports_modify);
  out.set_supports_get_snapshot(c.supports_get_snapshot);
  return out;
}

ControllerInfo from_proto(const v1::ControllerInfo& c) {
  ControllerInfo out;
  out.supports_create_delete = c.supports_create_delete();
  out.supports_attach_detach = c.supports_attach_detach();
  out.supports_list_volumes = c.supports_list_volumes();
  out.supports_get_capacity = c.supports_get_capacity();
  out.supports_create_delete_snapshot = c.supports_create_delete_snapshot();
  out.supports_list_snapshots = c.supports_list_snapshots();
  out.supports_clone = c.supports_clone();
  out.supports_read_only_attach = c.supports_read_only_attach();
  out.supports_expand = c.supports_expand();
  out.supports_list_volumes_attached_nodes = c.supports_list_volumes_attached_nodes();
  out.supports_condition = c.supports_condition();
  out.supports_get = c.supports_get();
  out.supports_group_snapshot = c.supports_group_snapshot();
  out.supports_modify = c.supports_modify();
  out.supports_get_snapshot = c.supports_get_snapshot();
  return out;
}

v1::NodeInfo to_proto(const NodeInfo& n) {
  v1::NodeInfo out;
  out.set_csi_node_id(n.id);
  out.set_max_volumes(n.max_volumes);
  fill(out.mutable_accessible_topology(), n.accessible_topology);
  out.set_requires_node_stage_volume(n.requires_node_stage_volume);
  out.set_supports_stats(n.supports_stats);
  out.set_supports_expand(n.supports_expand);
  out.set_supports_condition(n.supports_condition);
  out.set_supports_volume_mount_group(n.supports_volume_mount_group);
  return out;
}

NodeInfo from_proto(const v1::NodeInfo& n) {
  NodeInfo out;
  out.id = n.csi_node_id();
  out.max_volumes = n.max_volumes() > 0 ? n.max_volumes() : 0;
  out.accessible_topology = to_map(n.accessible_topology());
  out.requires_node_stage_volume = n.requires_node_stage_volume();
  out.supports_stats = n.supports_stats();
  out.supports_expand = n.supports_expand();
  out.supports_condition = n.supports_condition();
  out.supports_volume_mount_group = n.supports_volume_mount_group();
  return out;
}

v1::PluginFingerprint to_proto(const PluginInstance& i) {
  v1::PluginFingerprint out;
  out.set_plugin_id(i.plugin_id);
  out.set_type(to_proto(i.type));
  out.set_healthy(i.healthy);
  out.set_health_description(i.health_description);
  out.set_provider(i.provider);
  out.set_version(i.version);
  out.set_requires_controller_plugin(i.requires_controller_plugin);
  out.set_requires_topologies(i.requires_topologies);
  if (i.controller_info) *out.mutable_controller_info() = to_proto(*i.controller_info);
  if (i.node_info) *out.mutable_node_info() = to_proto(*i.node_info);
  out.set_update_time_ms(to_unix_ms(i.update_time));
  out.set_online_expansion(i.online_expansion);
  out.set_offline_expansion(i.offline_expansion);
  out.set_alloc_id(i.alloc_id);
  return out;
}

Expected<PluginInstance> from_proto(const v1::PluginFingerprint& fp, std::string_view node_id) {
  const std::string ctx = "plugin fingerprint \"" + fp.plugin_id() + "\"";
  if (fp.plugin_id().empty()) return error("plugin fingerprint: field \"plugin_id\": must not be empty");
  const auto type = from_proto(fp.type());
  if (!type) return error(ctx + ": field \"type\": unknown plugin type " + std::to_string(fp.type()));
  PluginInstance out;
  out.plugin_id = fp.plugin_id();
  out.node_id = std::string(node_id);
  out.type = *type;
  out.healthy = fp.healthy();
  out.health_description = fp.health_description();
  out.provider = fp.provider();
  out.version = fp.version();
  out.requires_controller_plugin = fp.requires_controller_plugin();
  out.requires_topologies = fp.requires_topologies();
  out.online_expansion = fp.online_expansion();
  out.offline_expansion = fp.offline_expansion();
  // The type decides which halves may exist, so a node-only plugin never looks like a controller;
  // a half the agent has not asked the plugin about yet (a fingerprint "starting") stays absent:
  // read as all-false capabilities, it would say "supports nothing" (issue 40).
  if (has_controller(*type) && fp.has_controller_info()) out.controller_info = from_proto(fp.controller_info());
  if (has_node(*type) && fp.has_node_info()) out.node_info = from_proto(fp.node_info());
  out.update_time = from_unix_ms(fp.update_time_ms());
  out.alloc_id = fp.alloc_id();
  return out;
}

}  // namespace mooring::domain
