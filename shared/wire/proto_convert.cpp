// Domain <-> mooring.v1. Enum mappings are explicit switches so a new proto value is a
// compile-time warning (with -Werror) rather than a silent default.
#include "shared/wire/proto_convert.hpp"

namespace mooring::domain {
namespace {

namespace v1 = ::mooring::v1;

StringMap to_map(const google::protobuf::Map<std::string, std::string>& m) { return StringMap(m.begin(), m.end()); }

void fill(google::protobuf::Map<std::string, std::string>* out, const StringMap& in) {
  out->clear();
  for (const auto& [k, v] : in) (*out)[k] = v;
}

}  // namespace

// ---- enums ----
v1::AccessMode to_proto(AccessMode m) {
  switch (m) {
    case AccessMode::unknown: return v1::ACCESS_MODE_UNKNOWN;
    case AccessMode::single_node_reader_only: return v1::ACCESS_MODE_SINGLE_NODE_READER_ONLY;
    case AccessMode::single_node_writer: return v1::ACCESS_MODE_SINGLE_NODE_WRITER;
    case AccessMode::multi_node_reader_only: return v1::ACCESS_MODE_MULTI_NODE_READER_ONLY;
    case AccessMode::multi_node_single_writer: return v1::ACCESS_MODE_MULTI_NODE_SINGLE_WRITER;
    case AccessMode::multi_node_multi_writer: return v1::ACCESS_MODE_MULTI_NODE_MULTI_WRITER;
  }
  return v1::ACCESS_MODE_UNKNOWN;
}

v1::AttachmentMode to_proto(AttachmentMode m) {
  switch (m) {
    case AttachmentMode::unknown: return v1::ATTACHMENT_MODE_UNKNOWN;
    case AttachmentMode::file_system: return v1::ATTACHMENT_MODE_FILE_SYSTEM;
    case AttachmentMode::block_device: return v1::ATTACHMENT_MODE_BLOCK_DEVICE;
  }
  return v1::ATTACHMENT_MODE_UNKNOWN;
}

v1::ClaimMode to_proto(ClaimMode m) {
  switch (m) {
    case ClaimMode::read: return v1::CLAIM_MODE_READ;
    case ClaimMode::write: return v1::CLAIM_MODE_WRITE;
  }
  return v1::CLAIM_MODE_UNSPECIFIED;
}

v1::ClaimState to_proto(ClaimState s) {
  switch (s) {
    case ClaimState::taken: return v1::CLAIM_STATE_TAKEN;
    case ClaimState::unpublishing: return v1::CLAIM_STATE_UNPUBLISHING;
    case ClaimState::node_detached: return v1::CLAIM_STATE_NODE_DETACHED;
    case ClaimState::controller_detached: return v1::CLAIM_STATE_CONTROLLER_DETACHED;
    case ClaimState::ready_to_free: return v1::CLAIM_STATE_READY_TO_FREE;
  }
  return v1::CLAIM_STATE_UNSPECIFIED;
}

v1::DesiredStatus to_proto(DesiredStatus s) {
  switch (s) {
    case DesiredStatus::run: return v1::DESIRED_STATUS_RUN;
    case DesiredStatus::stop: return v1::DESIRED_STATUS_STOP;
  }
  return v1::DESIRED_STATUS_UNSPECIFIED;
}

v1::ClientStatus to_proto(ClientStatus s) {
  switch (s) {
    case ClientStatus::pending: return v1::CLIENT_STATUS_PENDING;
    case ClientStatus::running: return v1::CLIENT_STATUS_RUNNING;
    case ClientStatus::complete: return v1::CLIENT_STATUS_COMPLETE;
    case ClientStatus::failed: return v1::CLIENT_STATUS_FAILED;
    case ClientStatus::lost: return v1::CLIENT_STATUS_LOST;
  }
  return v1::CLIENT_STATUS_UNSPECIFIED;
}

v1::PluginType to_proto(PluginType t) {
  switch (t) {
    case PluginType::controller: return v1::PLUGIN_TYPE_CONTROLLER;
    case PluginType::node: return v1::PLUGIN_TYPE_NODE;
    case PluginType::monolith: return v1::PLUGIN_TYPE_MONOLITH;
  }
  return v1::PLUGIN_TYPE_UNSPECIFIED;
}

std::optional<AccessMode> from_proto(v1::AccessMode m) {
  switch (m) {
    case v1::ACCESS_MODE_UNKNOWN: return AccessMode::unknown;
    case v1::ACCESS_MODE_SINGLE_NODE_READER_ONLY: return AccessMode::single_node_reader_only;
    case v1::ACCESS_MODE_SINGLE_NODE_WRITER: return AccessMode::single_node_writer;
    case v1::ACCESS_MODE_MULTI_NODE_READER_ONLY: return AccessMode::multi_node_reader_only;
    case v1::ACCESS_MODE_MULTI_NODE_SINGLE_WRITER: return AccessMode::multi_node_single_writer;
    case v1::ACCESS_MODE_MULTI_NODE_MULTI_WRITER: return AccessMode::multi_node_multi_writer;
    default: return std::nullopt;
  }
}

std::optional<AttachmentMode> from_proto(v1::AttachmentMode m) {
  switch (m) {
    case v1::ATTACHMENT_MODE_UNKNOWN: return AttachmentMode::unknown;
    case v1::ATTACHMENT_MODE_FILE_SYSTEM: return AttachmentMode::file_system;
    case v1::ATTACHMENT_MODE_BLOCK_DEVICE: return AttachmentMode::block_device;
    default: return std::nullopt;
  }
}

std::optional<ClaimMode> from_proto(v1::ClaimMode m) {
  switch (m) {
    case v1::CLAIM_MODE_READ: return ClaimMode::read;
    case v1::CLAIM_MODE_WRITE: return ClaimMode::write;
    default: return std::nullopt;
  }
}

std::optional<ClaimState> from_proto(v1::ClaimState s) {
  switch (s) {
    case v1::CLAIM_STATE_TAKEN: return ClaimState::taken;
    case v1::CLAIM_STATE_UNPUBLISHING: return ClaimState::unpublishing;
    case v1::CLAIM_STATE_NODE_DETACHED: return ClaimState::node_detached;
    case v1::CLAIM_STATE_CONTROLLER_DETACHED: return ClaimState::controller_detached;
    case v1::CLAIM_STATE_READY_TO_FREE: return ClaimState::ready_to_free;
    default: return std::nullopt;
  }
}

std::optional<DesiredStatus> from_proto(v1::DesiredStatus s) {
  switch (s) {
    case v1::DESIRED_STATUS_RUN: return DesiredStatus::run;
    case v1::DESIRED_STATUS_STOP: return DesiredStatus::stop;
    default: return std::nullopt;
  }
}

std::optional<ClientStatus> from_proto(v1::ClientStatus s) {
  switch (s) {
    case v1::CLIENT_STATUS_PENDING: return ClientStatus::pending;
    case v1::CLIENT_STATUS_RUNNING: return ClientStatus::running;
    case v1::CLIENT_STATUS_COMPLETE: return ClientStatus::complete;
    case v1::CLIENT_STATUS_FAILED: return ClientStatus::failed;
    case v1::CLIENT_STATUS_LOST: return ClientStatus::lost;
    default: return std::nullopt;
  }
}

std::optional<PluginType> from_proto(v1::PluginType t) {
  switch (t) {
    case v1::PLUGIN_TYPE_CONTROLLER: return PluginType::controller;
    case v1::PLUGIN_TYPE_NODE: return PluginType::node;
    case v1::PLUGIN_TYPE_MONOLITH: return PluginType::monolith;
    default: return std::nullopt;
  }
}

CsiAccessMode to_csi(AccessMode m) {
  using M = ::csi::v1::VolumeCapability::AccessMode;
  switch (m) {
    case AccessMode::unknown: return M::UNKNOWN;
    case AccessMode::single_node_reader_only: return M::SINGLE_NODE_READER_ONLY;
    case AccessMode::single_node_writer: return M::SINGLE_NODE_WRITER;
    case AccessMode::multi_node_reader_only: return M::MULTI_NODE_READER_ONLY;
    case AccessMode::multi_node_single_writer: return M::MULTI_NODE_SINGLE_WRITER;
    case AccessMode::multi_node_multi_writer: return M::MULTI_NODE_MULTI_WRITER;
  }
  return M::UNKNOWN;
}

std::optional<AccessMode> from_csi(CsiAccessMode m) {
  using M = ::csi::v1::VolumeCapability::AccessMode;
  switch (m) {
    case M::SINGLE_NODE_READER_ONLY: return AccessMode::single_node_reader_only;
    case M::SINGLE_NODE_WRITER: return AccessMode::single_node_writer;
    case M::MULTI_NODE_READER_ONLY: return AccessMode::multi_node_reader_only;
    case M::MULTI_NODE_SINGLE_WRITER: return AccessMode::multi_node_single_writer;
    case M::MULTI_NODE_MULTI_WRITER: return AccessMode::multi_node_multi_writer;
    default: return std::nullopt;
  }
}

// ---- messages ----
v1::MountOptions to_proto(const MountOptions& m) {
  v1::MountOptions out;
  out.set_fs_type(m.fs_type);
  for (const auto& f : m.mount_flags) out.add_mount_flags(f);
  out.set_group_change_policy(std::string(to_string(m.group_change_policy)));
  return out;
}

MountOptions from_proto(const v1::MountOptions& m) {
  return MountOptions{m.fs_type(), std::vector<std::string>(m.mount_flags().begin(), m.mount_flags().end()),
                      parse_group_change_policy(m.group_change_policy()).value_or(GroupChangePolicy::unset)};
}

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

v1::VolumeRequest to_proto(const VolumeRequest& r) {
  v1::VolumeRequest out;
  out.set_name(r.name);
  out.set_source(r.source);
  out.set_read_only(r.read_only);
  out.set_access_mode(to_proto(r.access_mode));
  out.set_attachment_mode(to_proto(r.attachment_mode));
  out.set_per_alloc(r.per_alloc);
  *out.mutable_mount_options() = to_proto(r.mount_options);
  return out;
}

Expected<VolumeRequest> from_proto(const v1::VolumeRequest& r) {
  const std::string ctx = "volume request \"" + r.name() + "\"";
  const auto access = from_proto(r.access_mode());
  if (!access) return error(ctx + ": field \"access_mode\": unknown access mode " + std::to_string(r.access_mode()));
  const auto attachment = from_proto(r.attachment_mode());
  if (!attachment) {
    return error(ctx + ": field \"attachment_mode\": unknown attachment mode " + std::to_string(r.attachment_mode()));
  }
  VolumeRequest out;
  out.name = r.name();
  out.source = r.source();
  out.read_only = r.read_only();
  out.access_mode = *access;
  out.attachment_mode = *attachment;
  out.per_alloc = r.per_alloc();
  out.mount_options = from_proto(r.mount_options());
  return out;
}

v1::Task to_proto(const Task& t) {
  v1::Task out;
  out.set_command(t.command);
  for (const auto& a : t.args) out.add_args(a);
  fill(out.mutable_env(), t.env);
  fill(out.mutable_secret_env(), t.secret_env);
  out.set_kill_timeout_ms(t.kill_timeout.count());
  out.set_user(t.user);
  out.mutable_resources()->set_cpu(t.resources.cpu);
  out.mutable_resources()->set_memory_mb(t.resources.memory_mb);
  if (t.csi_plugin) {
    auto* p = out.mutable_csi_plugin();
    p->set_id(t.csi_plugin->id);
    p->set_type(to_proto(t.csi_plugin->type));
    p->set_mount_dir(t.csi_plugin->mount_dir);
    p->set_health_timeout_ms(t.csi_plugin->health_timeout.count());
    p->set_stage_publish_base_dir(t.csi_plugin->stage_publish_base_dir);
  }
  return out;
}

Expected<Task> from_proto(const v1::Task& t) {
  Task out;
  out.command = t.command();
  out.args.assign(t.args().begin(), t.args().end());
  out.env = to_map(t.env());
  out.secret_env = to_map(t.secret_env());
  out.kill_timeout = Duration{t.kill_timeout_ms() > 0 ? t.kill_timeout_ms() : 0};
  out.user = t.user();
  out.resources =
      TaskResources{.cpu = std::max(0, t.resources().cpu()), .memory_mb = std::max(0, t.resources().memory_mb())};
  if (t.has_csi_plugin()) {
    const auto& p = t.csi_plugin();
    const auto type = from_proto(p.type());
    if (!type) return error("field \"task.csi_plugin.type\": unknown plugin type " + std::to_string(p.type()));
    out.csi_plugin = TaskCSIPlugin{.id = p.id(),
                                   .type = *type,
                                   .mount_dir = p.mount_dir(),
                                   .health_timeout = Duration{std::max<std::int64_t>(0, p.health_timeout_ms())},
                                   .stage_publish_base_dir = p.stage_publish_base_dir()};
  }
  return out;
}

v1::TaskEvent to_proto(const TaskEvent& e) {
  v1::TaskEvent out;
  out.set_time_ms(to_unix_ms(e.time));
  out.set_type(e.type);
  out.set_message(e.message);
  return out;
}

TaskEvent from_proto(const v1::TaskEvent& e) { return TaskEvent{from_unix_ms(e.time_ms()), e.type(), e.message()}; }

v1::NodeEvent to_proto(const NodeEvent& e) {
  v1::NodeEvent out;
  out.set_time_ms(to_unix_ms(e.time));
  out.set_subsystem(e.subsystem);
  out.set_message(e.message);
  fill(out.mutable_details(), e.details);
  return out;
}

NodeEvent from_proto(const v1::NodeEvent& e) {
  return NodeEvent{from_unix_ms(e.time_ms()), e.subsystem(), e.message(), to_map(e.details())};
}

v1::VolumeStats to_proto(const VolumeStatsReport& r) {
  v1::VolumeStats out;
  out.set_volume_id(r.volume_id);
  out.set_alloc_id(r.alloc_id);
  Time when{};
  if (r.usage) {
    out.set_has_usage(true);
    out.set_bytes_available(r.usage->bytes_available);
    out.set_bytes_total(r.usage->bytes_total);
    out.set_bytes_used(r.usage->bytes_used);
    out.set_inodes_available(r.usage->inodes_available);
    out.set_inodes_total(r.usage->inodes_total);
    out.set_inodes_used(r.usage->inodes_used);
    when = r.usage->update_time;
  }
  if (r.condition) {
    out.set_has_condition(true);
    out.set_abnormal(r.condition->abnormal);
    out.set_message(r.condition->message);
    when = r.condition->update_time;
  }
  out.set_time_ms(to_unix_ms(when));
  if (r.ownership) {
    out.set_has_ownership(true);
    out.set_ownership_group(r.ownership->group);
    out.set_ownership_by(r.ownership->by);
    out.set_ownership_walked(r.ownership->walked);
    out.set_ownership_time_ms(to_unix_ms(r.ownership->update_time));
  }
  return out;
}

VolumeStatsReport from_proto(const v1::VolumeStats& s) {
  VolumeStatsReport out{.volume_id = s.volume_id(), .alloc_id = s.alloc_id()};
  const Time when = from_unix_ms(s.time_ms());
  if (s.has_usage())
    out.usage = VolumeUsage{s.bytes_available(),
                            s.bytes_total(),
                            s.bytes_used(),
                            s.inodes_available(),
                            s.inodes_total(),
                            s.inodes_used(),
                            when};
  if (s.has_condition()) out.condition = VolumeCondition{s.abnormal(), s.message(), when};
  if (s.has_ownership())
    out.ownership = VolumeOwnership{s.ownership_group(), s.ownership_by(), s.ownership_walked(),
                                    from_unix_ms(s.ownership_time_ms())};
  return out;
}

v1::Allocation to_proto(const Allocation& a) {
  v1::Allocation out;
  out.set_id(a.id);
  out.set_name(a.name);
  out.set_node_id(a.node_id);
  out.set_desired_status(to_proto(a.desired_status));
  out.set_client_status(to_proto(a.client_status));
  for (const auto& [name, req] : a.volumes) {
    auto r = to_proto(req);
    r.set_name(name);  // the map key is the name
    *out.add_volumes() = std::move(r);
  }
  if (a.task) *out.mutable_task() = to_proto(*a.task);
  out.set_stop_after_client_disconnect_ms(a.stop_after_client_disconnect.count());
  out.set_create_index(a.create_index);
  out.set_modify_index(a.modify_index);
  out.set_index(a.index);
  if (a.ns != kDefaultNamespace) out.set_namespace_(a.ns);
  out.set_system_id(a.system_id);
  return out;
}

Expected<Allocation> from_proto(const v1::Allocation& a) {
  const std::string ctx = "allocation \"" + a.id() + "\"";
  const auto desired = from_proto(a.desired_status());
  if (!desired) return error(ctx + ": field \"desired_status\": unknown value " + std::to_string(a.desired_status()));
  const auto client = from_proto(a.client_status());
  if (!client) return error(ctx + ": field \"client_status\": unknown value " + std::to_string(a.client_status()));
  Allocation out;
  out.id = a.id();
  out.name = a.name();
  out.node_id = a.node_id();
  out.desired_status = *desired;
  out.client_status = *client;
  for (const auto& r : a.volumes()) {
    auto req = from_proto(r);
    if (!req) return error(ctx + ": " + req.error());
    if (out.volumes.count(req->name) != 0) {
      return error(ctx + ": field \"volumes\": duplicate volume request \"" + req->name + "\"");
    }
    out.volumes.emplace(req->name, std::move(*req));
  }
  if (a.has_task()) {
    auto task = from_proto(a.task());
    if (!task) return error(ctx + ": " + task.error());
    out.task = std::move(*task);
  }
  out.system_id = a.system_id();
  out.stop_after_client_disconnect = Duration{std::max<std::int64_t>(0, a.stop_after_client_disconnect_ms())};
  out.create_index = a.create_index();
  out.modify_index = a.modify_index();
  out.index = a.index();
  if (!a.namespace_().empty()) {
    if (auto s = validate_namespace(a.namespace_()); !s) return error(ctx + ": field \"namespace\": " + s.error());
    out.ns = a.namespace_();
  }
  return out;
}

v1::VolumeMountInfo mount_info(const Volume& v, const Claim& claim, bool read_only) {
  VolumeMount m;
  m.volume_id = volume_key(v.ns, v.id);
  m.external_id = v.external_id;
  m.plugin_id = v.plugin_id;
  m.secrets = v.secrets;
  m.volume_context = v.context;
  m.publish_context = claim.publish_context;
  m.mount_options = v.mount_options;
  m.access_mode = claim.access_mode;
  m.attachment_mode = claim.attachment_mode;
  m.read_only = read_only;
  return to_proto(m);
}

v1::VolumeMountInfo to_proto(const VolumeMount& m) {
  v1::VolumeMountInfo out;
  out.set_volume_id(m.volume_id);
  out.set_external_id(m.external_id);
  out.set_plugin_id(m.plugin_id);
  fill(out.mutable_secrets(), m.secrets);
  fill(out.mutable_volume_context(), m.volume_context);
  fill(out.mutable_publish_context(), m.publish_context);
  *out.mutable_mount_options() = to_proto(m.mount_options);
  out.set_access_mode(to_proto(m.access_mode));
  out.set_attachment_mode(to_proto(m.attachment_mode));
  out.set_read_only(m.read_only);
  return out;
}

Expected<VolumeMount> from_proto(const v1::VolumeMountInfo& m) {
  const std::string ctx = "volume mount \"" + m.volume_id() + "\"";
  const auto access = from_proto(m.access_mode());
  if (!access || *access == AccessMode::unknown) {
    return error(ctx + ": field \"access_mode\": missing or unknown access mode " + std::to_string(m.access_mode()));
  }
  const auto attachment = from_proto(m.attachment_mode());
  if (!attachment || *attachment == AttachmentMode::unknown) {
    return error(ctx + ": field \"attachment_mode\": missing or unknown attachment mode " +
                 std::to_string(m.attachment_mode()));
  }
  VolumeMount out;
  out.volume_id = m.volume_id();
  out.external_id = m.external_id();
  out.plugin_id = m.plugin_id();
  out.secrets = to_map(m.secrets());
  out.volume_context = to_map(m.volume_context());
  out.publish_context = to_map(m.publish_context());
  out.mount_options = from_proto(m.mount_options());
  out.access_mode = *access;
  out.attachment_mode = *attachment;
  out.read_only = m.read_only();
  return out;
}

}  // namespace mooring::domain
