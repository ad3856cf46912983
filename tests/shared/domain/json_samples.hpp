// Sample objects with every kind of field set, for the JSON codec tests.
#pragma once

#include <chrono>
#include <string>

#include "shared/domain/allocation.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::domain::samples {

using namespace std::chrono_literals;

inline Claim sample_claim(std::string alloc, ClaimMode mode, ClaimState state) {
  Claim c;
  c.allocation_id = std::move(alloc);
  c.node_id = "node-1";
  c.external_node_id = "i-0abc";
  c.mode = mode;
  c.access_mode = AccessMode::multi_node_single_writer;
  c.attachment_mode = AttachmentMode::file_system;
  c.state = state;
  c.publish_context = {{"device", "/dev/xvdf"}};
  c.last_error = state == ClaimState::taken ? "" : "controller unreachable";
  c.next_attempt = state == ClaimState::taken ? Time{} : from_unix_ms(1'700'000'100'000);
  c.create_time = from_unix_ms(1'700'000'000'000);
  c.update_time = from_unix_ms(1'700'000'050'250);
  return c;
}

inline Volume sample_volume() {
  Volume v;
  v.id = "vol-1";
  v.name = "database";
  v.plugin_id = "hostpath";
  v.external_id = "ext-123";
  v.provider = "hostpath.mooring.io";
  v.provider_version = "1.0.0";
  v.requested_capabilities = {{AccessMode::multi_node_single_writer, AttachmentMode::file_system},
                              {AccessMode::single_node_writer, AttachmentMode::block_device}};
  v.mount_options = {"ext4", {"noatime", "password=hunter2"}};
  v.secrets = {{"token", "s3cr3t"}};
  v.parameters = {{"type", "gp3"}};
  v.context = {{"share", "/exports/1"}};
  v.requested_capacity_min = 1 << 20;
  v.requested_capacity_max = 1 << 30;
  v.capacity = 1 << 21;
  v.requested_topologies.required = {Topology{{{"zone", "a"}}}};
  v.requested_topologies.preferred = {Topology{{{"zone", "b"}, {"rack", "7"}}}};
  v.topologies = {Topology{{{"zone", "a"}}}};
  v.snapshot_id = "snap-9";
  v.access_mode = AccessMode::multi_node_single_writer;
  v.attachment_mode = AttachmentMode::file_system;
  v.claims["alloc-w"] = sample_claim("alloc-w", ClaimMode::write, ClaimState::taken);
  v.claims["alloc-r"] = sample_claim("alloc-r", ClaimMode::read, ClaimState::taken);
  v.claims["alloc-old"] = sample_claim("alloc-old", ClaimMode::write, ClaimState::node_detached);
  v.deleting = true;
  v.create_index = 7;
  v.modify_index = 42;
  return v;
}

inline PluginInstance sample_instance(std::string node, PluginType type) {
  PluginInstance i;
  i.plugin_id = "hostpath";
  i.node_id = std::move(node);
  i.type = type;
  i.healthy = true;
  i.health_description = "healthy";
  i.provider = "hostpath.mooring.io";
  i.version = "1.0.0";
  i.requires_controller_plugin = true;
  i.requires_topologies = true;
  i.online_expansion = true;
  if (has_controller(type)) i.controller_info = ControllerInfo{.supports_attach_detach = true, .supports_get = true};
  if (has_node(type)) {
    i.node_info = NodeInfo{.id = "csi-n1", .max_volumes = 8, .accessible_topology = {{"zone", "a"}},
                           .requires_node_stage_volume = true, .supports_stats = true};
  }
  i.update_time = from_unix_ms(1'700'000'000'999);
  return i;
}

inline Plugin sample_plugin() {
  Plugin p;
  p.id = "hostpath";
  upsert_instance(p, sample_instance("n1", PluginType::monolith));
  upsert_instance(p, sample_instance("n2", PluginType::node));
  p.create_index = 3;
  p.modify_index = 9;
  return p;
}

inline Node sample_node() {
  Node n;
  n.id = "n1";
  n.name = "worker-1";
  n.address = "10.0.0.1:4702";
  n.status = NodeStatus::ready;
  n.attributes = {{"os", "linux"}};
  n.plugins["hostpath"] = sample_instance("n1", PluginType::monolith);
  n.last_heartbeat = from_unix_ms(1'700'000'000'500);
  n.events = {NodeEvent{from_unix_ms(1'700'000'000'000), "plugin", "plugin became healthy", {{"plugin_id", "hostpath"}}}};
  n.create_index = 1;
  n.modify_index = 2;
  return n;
}

inline Allocation sample_allocation() {
  Allocation a;
  a.id = "3f0e6a1c-9b2d-4c1e-8f3a-5d6b7c8e9f01";
  a.name = "web";
  a.node_id = "n1";
  a.desired_status = DesiredStatus::run;
  a.client_status = ClientStatus::running;
  VolumeRequest r;
  r.name = "data";
  r.source = "vol-1";
  r.read_only = true;
  r.access_mode = AccessMode::multi_node_reader_only;
  r.attachment_mode = AttachmentMode::file_system;
  r.per_alloc = true;
  r.mount_options = {"xfs", {"ro", "password=x"}};
  a.volumes["data"] = r;
  a.task = Task{"/bin/sh", {"-c", "sleep 1"}, {{"DB_PASSWORD", "pw"}, {"MODE", "prod"}}, 5s};
  a.stop_after_client_disconnect = 90s;
  a.index = 2;
  a.events = {TaskEvent{from_unix_ms(1'700'000'000'000), "Received", "placed on n1"}};
  a.create_index = 10;
  a.modify_index = 11;
  return a;
}

}  // namespace mooring::domain::samples
