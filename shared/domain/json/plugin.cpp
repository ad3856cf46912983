// JSON tables and codecs for plugins: the aggregate per plugin id and each node's instance
// (fingerprint) with its controller and node facts.
#include "shared/domain/json.hpp"
#include "shared/domain/json/fields.hpp"
#include "shared/domain/storage_text.hpp"

namespace mooring::domain {
namespace codec {
namespace {

constexpr Field<ControllerInfo> kControllerInfo[] = {
    field<&ControllerInfo::supports_create_delete>("SupportsCreateDelete", kOut),
    field<&ControllerInfo::supports_attach_detach>("SupportsAttachDetach", kOut),
    field<&ControllerInfo::supports_list_volumes>("SupportsListVolumes", kOut),
    field<&ControllerInfo::supports_get_capacity>("SupportsGetCapacity", kOut),
    field<&ControllerInfo::supports_create_delete_snapshot>("SupportsCreateDeleteSnapshot", kOut),
    field<&ControllerInfo::supports_list_snapshots>("SupportsListSnapshots", kOut),
    field<&ControllerInfo::supports_clone>("SupportsClone", kOut),
    field<&ControllerInfo::supports_read_only_attach>("SupportsReadOnlyAttach", kOut),
    field<&ControllerInfo::supports_expand>("SupportsExpand", kOut),
    field<&ControllerInfo::supports_list_volumes_attached_nodes>("SupportsListVolumesAttachedNodes", kOut),
    field<&ControllerInfo::supports_condition>("SupportsCondition", kOut),
    field<&ControllerInfo::supports_get>("SupportsGet", kOut),
    field<&ControllerInfo::supports_group_snapshot>("SupportsGroupSnapshot", kOut),
    field<&ControllerInfo::supports_modify>("SupportsModify", kOut),
    field<&ControllerInfo::supports_get_snapshot>("SupportsGetSnapshot", kOut),
};

// A node's topology is a bare map in memory and {"Segments": {...}} (or null) on the wire.
json segments_json(const StringMap& segments, View) {
  if (segments.empty()) return nullptr;
  return json{{"Segments", string_map_json(segments, false)}};
}

void read_segments(Reader& r, std::string_view key, StringMap& out) {
  r.object(key, [&](Reader& c) { c.string_map("Segments", out); });
}

constexpr Field<NodeInfo> kNodeInfo[] = {
    field<&NodeInfo::id>("ID", kOut),
    field<&NodeInfo::max_volumes>("MaxVolumes", kOut, {.non_negative = kStore}),
    custom<&NodeInfo::accessible_topology, segments_json, read_segments>("AccessibleTopology", kOut),
    field<&NodeInfo::requires_node_stage_volume>("RequiresNodeStageVolume", kOut),
    field<&NodeInfo::supports_stats>("SupportsStats", kOut),
    field<&NodeInfo::supports_expand>("SupportsExpand", kOut),
    field<&NodeInfo::supports_condition>("SupportsCondition", kOut),
    field<&NodeInfo::supports_volume_mount_group>("SupportsVolumeMountGroup", kOut),
};

constexpr Field<PluginInstance> kInstance[] = {
    field<&PluginInstance::plugin_id>("PluginID", kOut),
    field<&PluginInstance::node_id>("NodeID", kOut),
    field<&PluginInstance::type>("Type", kOut),
    field<&PluginInstance::healthy>("Healthy", kOut),
    field<&PluginInstance::health_description>("HealthDescription", kOut),
    field<&PluginInstance::provider>("Provider", kOut),
    field<&PluginInstance::version>("Version", kOut),
    field<&PluginInstance::requires_controller_plugin>("RequiresControllerPlugin", kOut),
    field<&PluginInstance::requires_topologies>("RequiresTopologies", kOut),
    field<&PluginInstance::online_expansion>("OnlineExpansion", kOut),
    field<&PluginInstance::offline_expansion>("OfflineExpansion", kOut),
    field<&PluginInstance::controller_info>("ControllerInfo", kOut),
    field<&PluginInstance::node_info>("NodeInfo", kOut),
    field<&PluginInstance::update_time>("UpdateTime", kOut),
    field<&PluginInstance::alloc_id>("AllocID", kOut),
};

// Stored: the id and indexes only. Everything else is derived from the instances, which are
// stored once, in each node's row (Node::plugins), and folded in memory at load and on each
// change (services/controlplane/state/plugin_aggregates.hpp); a row from before that holds the
// maps and counts still decodes (they are not read) and is rewritten at start.
constexpr unsigned kShown = kApi | kStub;
constexpr Field<Plugin> kPlugin[] = {
    field<&Plugin::id>("ID", kAll),
    field<&Plugin::provider>("Provider", kShown),
    field<&Plugin::version>("Version", kApi),
    field<&Plugin::controller_required>("ControllerRequired", kShown),
    field<&Plugin::controllers>("Controllers", kApi),
    field<&Plugin::nodes>("Nodes", kApi),
    field<&Plugin::controllers_healthy>("ControllersHealthy", kShown),
    field<&Plugin::controllers_expected>("ControllersExpected", kShown),
    field<&Plugin::nodes_healthy>("NodesHealthy", kShown),
    field<&Plugin::nodes_expected>("NodesExpected", kShown),
    field<&Plugin::create_index>("CreateIndex", kAll),
    field<&Plugin::modify_index>("ModifyIndex", kAll),
};

}  // namespace

Table<ControllerInfo> fields_of(std::type_identity<ControllerInfo>) { return kControllerInfo; }
Table<NodeInfo> fields_of(std::type_identity<NodeInfo>) { return kNodeInfo; }
Table<PluginInstance> fields_of(std::type_identity<PluginInstance>) { return kInstance; }
Table<Plugin> fields_of(std::type_identity<Plugin>) { return kPlugin; }

}  // namespace codec

using codec::json;
using codec::View;

json to_api_json(const Plugin& p) { return codec::write_object(p, View::api); }
json to_api_json(const PluginInstance& i) { return codec::write_object(i, View::api); }
json to_api_stub(const Plugin& p) { return codec::write_object(p, View::stub); }
json to_storage_json(const Plugin& p) { return codec::write_object(p, View::storage); }
std::string to_storage_text(const Plugin& p) { return codec::write_text(p, View::storage); }
json to_storage_json(const PluginInstance& i) { return codec::write_object(i, View::storage); }

Expected<Plugin> plugin_from_storage(const json& j) {
  return codec::from_storage<Plugin>(j, "stored " + codec::object_name("plugin", j, "ID"), &Plugin::id);
}

Expected<PluginInstance> plugin_instance_from_storage(const json& j) {
  return codec::from_storage<PluginInstance>(j, "stored " + codec::object_name("plugin instance", j, "PluginID"));
}

}  // namespace mooring::domain
