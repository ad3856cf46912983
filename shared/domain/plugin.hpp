// Domain: CSI plugins — what one node's instance reported (fingerprint) and the aggregate
// record per plugin id with healthy/expected counts, as the plugin API shows them.
#pragma once

#include "shared/domain/modes.hpp"
#include "shared/domain/time.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mooring::domain {

struct ControllerInfo {
  bool supports_create_delete = false;
  bool supports_attach_detach = false;  // PUBLISH_UNPUBLISH_VOLUME
  bool supports_list_volumes = false;
  bool supports_get_capacity = false;
  bool supports_create_delete_snapshot = false;
  bool supports_list_snapshots = false;
  bool supports_clone = false;
  bool supports_read_only_attach = false;
  bool supports_expand = false;
  bool supports_list_volumes_attached_nodes = false;
  bool supports_condition = false;
  bool supports_get = false;
  bool supports_group_snapshot = false;  // GroupController: CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  bool supports_modify = false;          // MODIFY_VOLUME: ControllerModifyVolume
  bool supports_get_snapshot = false;    // GET_SNAPSHOT: GetSnapshot
  bool operator==(const ControllerInfo&) const = default;
};

struct NodeInfo {
  std::string id;                // CSI node id (NodeGetInfo.node_id)
  std::int64_t max_volumes = 0;  // 0 = unlimited
  std::map<std::string, std::string> accessible_topology;
  bool requires_node_stage_volume = false;
  bool supports_stats = false;
  bool supports_expand = false;
  bool supports_condition = false;
  bool supports_volume_mount_group = false;  // VOLUME_MOUNT_GROUP
  bool operator==(const NodeInfo&) const = default;
};

// One plugin on one node (a fingerprint). Monoliths carry both infos.
struct PluginInstance {
  std::string plugin_id;
  std::string node_id;  // Mooring node id
  PluginType type = PluginType::node;
  bool healthy = false;
  std::string health_description;
  std::string provider;
  std::string version;
  bool requires_controller_plugin = false;  // CONTROLLER_SERVICE advertised
  bool requires_topologies = false;         // VOLUME_ACCESSIBILITY_CONSTRAINTS advertised
  bool online_expansion = false;
  bool offline_expansion = false;
  std::optional<ControllerInfo> controller_info;  // set for controller and monolith
  std::optional<NodeInfo> node_info;              // set for node and monolith
  Time update_time{};
  std::string alloc_id;  // the allocation that runs this instance; empty for config plugins
  bool operator==(const PluginInstance&) const = default;
};

struct Plugin {
  std::string id;
  std::string provider;
  std::string version;
  bool controller_required = false;
  std::map<std::string, PluginInstance> controllers;  // Mooring node id -> instance
  std::map<std::string, PluginInstance> nodes;        // Mooring node id -> instance
  int controllers_healthy = 0;
  int controllers_expected = 0;
  int nodes_healthy = 0;
  int nodes_expected = 0;
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const Plugin&) const = default;
};

// Recomputes the healthy/expected counts from the instance maps (expected = instances known)
// and provider/version/controller_required from the newest instance.
void recount(Plugin& plugin);

// Folds one fingerprint into the aggregate: replaces the instance for its node in the
// controller and/or node map according to its type, removes it from the map it no longer
// belongs to, then recounts.
void upsert_instance(Plugin& plugin, const PluginInstance& instance);
// Folds all of one node's instances of the plugin: one instance, or the controller and the node
// instance of a plugin split on that node. Each lands in the map of its type; the node leaves a
// map none of them serves. Then recounts.
void set_node_instances(Plugin& plugin, const std::string& node_id, const std::vector<PluginInstance>& instances);
// Removes every instance of the node; returns true when something was removed.
bool remove_node(Plugin& plugin, const std::string& node_id);

// An instance whose plugin has answered the fingerprint calls at least once (it carries the
// controller or node facts its type promises). A restarted agent reports its plugins before it
// has fingerprinted them again: such an instance says nothing about the plugin's capabilities.
bool fingerprinted(const PluginInstance& instance);

// Does the plugin attach volumes through its controller (PUBLISH_UNPUBLISH_VOLUME)? nullopt
// while that is not known: no controller instance has reported its capabilities, and the
// fingerprinted instances advertise CONTROLLER_SERVICE or none is fingerprinted yet. Unknown is
// never "no": skipping ControllerPublish or ControllerUnpublish on a guess leaves a volume
// attached to a node that no claim names.
std::optional<bool> needs_controller_publish(const Plugin& plugin);

}  // namespace mooring::domain
