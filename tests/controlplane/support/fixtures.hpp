// Test support: small domain objects used across control plane tests.
#pragma once

#include <string>

#include "shared/domain/allocation.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane::fixtures {

inline domain::Volume volume(std::string id, std::string plugin = "hostpath") {
  domain::Volume v;
  v.id = std::move(id);
  v.name = v.id;
  v.plugin_id = std::move(plugin);
  v.external_id = "ext-" + v.id;
  v.requested_capabilities = {{domain::AccessMode::single_node_writer, domain::AttachmentMode::file_system}};
  v.secrets = {{"password", "hunter2"}};
  return v;
}

// A plugin with one healthy node instance on `node` (a monolith when `controller`).
inline domain::Plugin plugin(std::string id = "hostpath", std::string node = "node-1", bool controller = false) {
  domain::Plugin p;
  p.id = std::move(id);
  domain::PluginInstance i;
  i.plugin_id = p.id;
  i.node_id = std::move(node);
  i.type = controller ? domain::PluginType::monolith : domain::PluginType::node;
  i.healthy = true;
  i.provider = "hostpath.mooring.dev";
  i.version = "0.1.0";
  i.requires_controller_plugin = controller;
  i.node_info = domain::NodeInfo{};
  i.node_info->id = "csi-" + i.node_id;
  if (controller) i.controller_info = domain::ControllerInfo{};
  domain::upsert_instance(p, i);
  return p;
}

// A write claim of `alloc` on `node` in `state`, with the node's CSI id unless told otherwise.
inline domain::Claim claim(const std::string& alloc, const std::string& node, domain::ClaimState state,
                           bool with_csi_node = true) {
  domain::Claim c;
  c.allocation_id = alloc;
  c.node_id = node;
  if (with_csi_node) c.external_node_id = "csi-" + node;
  c.mode = domain::ClaimMode::write;
  c.access_mode = domain::AccessMode::single_node_writer;
  c.attachment_mode = domain::AttachmentMode::file_system;
  c.state = state;
  return c;
}

inline domain::Allocation allocation(std::string id, std::string node = "") {
  domain::Allocation a;
  a.id = std::move(id);
  a.name = "web";
  a.node_id = std::move(node);
  return a;
}

// A ready node at an unreachable address carrying `plugin`'s instance on it, as its agent would
// have reported it (volumes need the plugin to register, allocations a node to be placed on).
inline domain::Node ready_node(const domain::Plugin& plugin, const std::string& id) {
  domain::Node node;
  node.id = id;
  node.address = "127.0.0.1:1";
  node.status = domain::NodeStatus::ready;
  node.plugins[plugin.id] = plugin.nodes.at(id);
  return node;
}

}  // namespace mooring::controlplane::fixtures
