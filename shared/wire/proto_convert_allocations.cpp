// Wire: an allocation, its volume requests, its task and task events <-> mooring.v1.
#include "shared/wire/proto_convert.hpp"
#include "shared/wire/proto_convert_parts.hpp"

namespace mooring::domain {

namespace v1 = ::mooring::v1;

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

}  // namespace mooring::domain
