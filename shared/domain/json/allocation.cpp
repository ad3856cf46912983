// JSON tables and codecs for allocations: volume requests, the task and its events. API output
// redacts mount flags and names SecretEnv's keys only; API input adds the submit rules.
#include "shared/domain/ids.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/json/fields.hpp"
#include "shared/domain/storage_text.hpp"
#include "shared/domain/task_user.hpp"

namespace mooring::domain {
namespace codec {
namespace {

constexpr unsigned kIn = kOut | kInput;
using VolumeRequests = std::map<std::string, VolumeRequest>;

constexpr Field<VolumeRequest> kVolumeRequest[] = {
    field<&VolumeRequest::type>("Type", kIn),
    field<&VolumeRequest::source>("Source", kIn),
    field<&VolumeRequest::read_only>("ReadOnly", kIn),
    field<&VolumeRequest::access_mode>("AccessMode", kIn),
    field<&VolumeRequest::attachment_mode>("AttachmentMode", kIn),
    field<&VolumeRequest::per_alloc>("PerAlloc", kIn),
    field<&VolumeRequest::mount_options>("MountOptions", kIn),
};

constexpr Field<TaskCSIPlugin> kTaskCSIPlugin[] = {
    field<&TaskCSIPlugin::id>("ID", kIn),
    field<&TaskCSIPlugin::type>("Type", kIn),
    field<&TaskCSIPlugin::mount_dir>("MountDir", kIn),
    field<&TaskCSIPlugin::health_timeout>("HealthTimeout", kIn, {.non_negative = kInput}),
    field<&TaskCSIPlugin::stage_publish_base_dir>("StagePublishBaseDir", kIn),
};

constexpr Field<TaskResources> kTaskResources[] = {
    field<&TaskResources::cpu>("CPU", kIn),
    field<&TaskResources::memory_mb>("MemoryMB", kIn),
};

constexpr Field<Task> kTask[] = {
    field<&Task::command>("Command", kIn),
    field<&Task::args>("Args", kIn),
    field<&Task::env>("Env", kIn),  // readable with read-alloc; secrets go in SecretEnv
    field<&Task::secret_env>("SecretEnv", kIn, {.secret = true}),
    field<&Task::kill_timeout>("KillTimeout", kIn),
    field<&Task::csi_plugin>("CSIPlugin", kIn),
    field<&Task::user>("User", kIn),
    field<&Task::resources>("Resources", kIn),
};

constexpr Field<TaskEvent> kTaskEvent[] = {
    field<&TaskEvent::time>("Time", kOut),
    field<&TaskEvent::type>("Type", kOut),
    field<&TaskEvent::message>("Message", kOut),
};

constexpr Field<SystemNodeState> kSystemNodeState[] = {
    field<&SystemNodeState::restarts>("Restarts", kOut),
    field<&SystemNodeState::backoff>("Backoff", kOut),
    field<&SystemNodeState::next_restart>("NextRestart", kOut),
    field<&SystemNodeState::copy_created>("CopyCreated", kOut),
    field<&SystemNodeState::stopped>("Stopped", kOut),
    field<&SystemNodeState::message>("Message", kOut),
};

constexpr Field<RolloutNode> kRolloutNode[] = {
    field<&RolloutNode::node_id>("NodeID", kOut),          field<&RolloutNode::state>("State", kOut),
    field<&RolloutNode::message>("Message", kOut),         field<&RolloutNode::old_alloc_id>("OldAllocID", kOut),
    field<&RolloutNode::new_alloc_id>("NewAllocID", kOut), field<&RolloutNode::started>("Started", kOut),
};

constexpr Field<Rollout> kRollout[] = {
    field<&Rollout::version>("Version", kOut),
    field<&Rollout::status>("Status", kOut),
    field<&Rollout::nodes>("Nodes", kOut),
};

// A submitted request must name a csi volume it can claim, and both modes.
void check_submitted(Reader& c, const VolumeRequest& req) {
  if (req.type != "csi") return c.fail("Type", "unsupported volume type \"" + req.type + "\" (only \"csi\")");
  if (req.source.empty()) return c.fail("Source", "required");
  if (auto s = validate_volume_id(req.per_alloc ? per_alloc_volume_id(req.source, 0) : req.source); !s) {
    return c.fail("Source", s.error());
  }
  if (req.access_mode == AccessMode::unknown) return c.fail("AccessMode", "required");
  if (req.attachment_mode == AttachmentMode::unknown) return c.fail("AttachmentMode", "required");
}

// Requests are keyed by name; the name is not a field of the request's object.
void read_volume_requests(Reader& r, std::string_view key, VolumeRequests& out) {
  r.object_map(key, [&](Reader& c, const std::string& name) {
    VolumeRequest req;
    req.name = name;
    read_fields(c, req);
    if (r.strict()) {
      if (!c.ok()) return;
      if (name.empty()) return r.fail(key, "volume request names must not be empty");
      check_submitted(c, req);
      if (!c.ok()) return;
    }
    out[name] = std::move(req);
  });
}

json volume_requests_json(const VolumeRequests& requests, View view) { return *write_value(requests, {}, view); }
void volume_requests_text(const VolumeRequests& requests, View view, std::string& out) {
  write_value_text(requests, {}, view, out);
}

// Input takes what a submitter chooses; ID, statuses and indexes are the control plane's.
constexpr Field<Allocation> kAllocation[] = {
    field<&Allocation::ns>("Namespace", kAll | kInput),
    field<&Allocation::id>("ID", kAll),
    field<&Allocation::name>("Name", kAll | kInput),
    field<&Allocation::node_id>("NodeID", kAll | kInput),
    field<&Allocation::desired_status>("DesiredStatus", kAll),
    field<&Allocation::client_status>("ClientStatus", kAll),
    field<&Allocation::stop_after_client_disconnect>("StopAfterClientDisconnect", kIn, {.null_when_empty = true}),
    custom<&Allocation::volumes, volume_requests_json, read_volume_requests, volume_requests_text>("Volumes", kIn),
    field<&Allocation::task>("Task", kIn),
    field<&Allocation::index>("Index", kOut),
    field<&Allocation::system>("System", kAll | kInput),
    field<&Allocation::node_selector>("NodeSelector", kIn),
    field<&Allocation::system_id>("SystemID", kAll),
    field<&Allocation::system_nodes>("SystemNodes", kStore),  // the API shows them as Copies
    field<&Allocation::rollout>("Rollout", kOut),
    field<&Allocation::migrate>("Migrate", kAll | kInput),
    field<&Allocation::migrated_from>("MigratedFrom", kAll),
    field<&Allocation::events>("Events", kOut),
    field<&Allocation::create_index>("CreateIndex", kAll),
    field<&Allocation::modify_index>("ModifyIndex", kAll),
};

}  // namespace

Table<VolumeRequest> fields_of(std::type_identity<VolumeRequest>) { return kVolumeRequest; }
Table<TaskCSIPlugin> fields_of(std::type_identity<TaskCSIPlugin>) { return kTaskCSIPlugin; }
Table<TaskResources> fields_of(std::type_identity<TaskResources>) { return kTaskResources; }
Table<Task> fields_of(std::type_identity<Task>) { return kTask; }
Table<SystemNodeState> fields_of(std::type_identity<SystemNodeState>) { return kSystemNodeState; }
Table<RolloutNode> fields_of(std::type_identity<RolloutNode>) { return kRolloutNode; }
Table<Rollout> fields_of(std::type_identity<Rollout>) { return kRollout; }
Table<TaskEvent> fields_of(std::type_identity<TaskEvent>) { return kTaskEvent; }
Table<Allocation> fields_of(std::type_identity<Allocation>) { return kAllocation; }

// An environment entry is "name=value": a name with "=" would set another variable than the
// one named, and an empty one is no variable. (NUL bytes the reader refuses in every string.)
void check_env_names(Reader& r, std::string_view key, const StringMap& env) {
  for (const auto& [name, value] : env) {
    if (!r.ok()) return;
    if (name.empty())
      r.fail(key, "a variable name must not be empty");
    else if (name.find('=') != std::string::npos)
      r.fail(key, "variable name \"" + name + "\" must not contain \"=\"");
  }
}

void check_input(Reader& r, Task& task) {
  if (r.ok() && task.command.empty()) r.fail("Command", "required");
  check_env_names(r, "Env", task.env);
  check_env_names(r, "SecretEnv", task.secret_env);
  if (r.ok() && (task.resources.cpu < 0 || task.resources.memory_mb < 0))
    return r.fail("Resources", std::string(task.resources.cpu < 0 ? "CPU" : "MemoryMB") + " must not be negative");
  if (r.ok() && !task.user.empty()) {
    // A plugin mounts for the node: root in the node's namespaces, whatever User would say.
    if (task.csi_plugin) return r.fail("User", "a CSI plugin task runs as root; it takes no User");
    if (auto u = parse_task_user(task.user); !u) r.fail("User", u.error());
  }
}

// The socket directory lives under the task's directory: a relative path that stays inside it.
void check_input(Reader& r, TaskCSIPlugin& plugin) {
  if (!r.ok()) return;
  if (plugin.id.empty()) return r.fail("ID", "required");
  if (auto s = validate_plugin_id(plugin.id); !s) return r.fail("ID", s.error());
  if (plugin.mount_dir.empty()) return r.fail("MountDir", "must not be empty");
  if (plugin.mount_dir.front() == '/' || plugin.mount_dir == ".." || plugin.mount_dir.starts_with("../") ||
      plugin.mount_dir.find("/../") != std::string::npos || plugin.mount_dir.ends_with("/.."))
    return r.fail("MountDir", "must be a relative path inside the task's directory");
  if (plugin.health_timeout.count() <= 0) return r.fail("HealthTimeout", "must be positive");
  if (!plugin.stage_publish_base_dir.empty() && plugin.stage_publish_base_dir.front() != '/')
    return r.fail("StagePublishBaseDir", "must be an absolute path");
}

}  // namespace codec

using codec::json;
using codec::View;

json to_api_json(const Allocation& a) { return codec::write_object(a, View::api); }
json to_api_stub(const Allocation& a) { return codec::write_object(a, View::stub); }
json to_storage_json(const Allocation& a) { return codec::write_object(a, View::storage); }
std::string to_storage_text(const Allocation& a) { return codec::write_text(a, View::storage); }

Expected<Allocation> allocation_from_api(const json& j) {
  codec::Ctx ctx{codec::object_name("allocation", j, "Name"), {}};
  Allocation a;
  codec::Reader r(j, ctx, "", true);
  codec::read_fields(r, a);
  r.finish();
  if (r.ok())
    if (auto s = validate_namespace(a.ns); !s) r.fail("Namespace", s.error());
  if (r.ok() && !a.node_id.empty()) {
    if (auto s = validate_id(IdKind::node, a.node_id); !s) r.fail("NodeID", s.error());
  }
  return codec::finish(ctx, std::move(a));
}

Expected<Allocation> allocation_request_from_api(const json& j) {
  codec::Ctx ctx{"request", {}};
  codec::Reader r(j, ctx, "", true);
  const json* inner = r.get("Allocation");
  r.finish();
  if (r.ok() && inner == nullptr) r.fail("Allocation", "required");
  if (ctx.error) return error(*ctx.error);
  return allocation_from_api(*inner);
}

Expected<Allocation> allocation_from_storage(const json& j) {
  return codec::from_storage<Allocation>(j, "stored " + codec::object_name("allocation", j, "ID"), &Allocation::id);
}

}  // namespace mooring::domain
