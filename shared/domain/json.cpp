// JSON codecs. Decoding goes through one Reader that tracks which fields were read, so strict
// (API) decoding can reject unknown fields and every error names the object and field path.
#include "shared/domain/json.hpp"

#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"

#include <nlohmann/json.hpp>

#include <limits>
#include <set>

namespace mooring::domain {
namespace {

using nlohmann::json;

// ------------------------------------------------------------------ decoding helpers

std::string type_name(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

// Error state shared by a reader and its children: the first error wins.
struct Ctx {
  std::string object;  // `volume "vol-1"`
  std::optional<std::string> error;
};

class Reader {
 public:
  Reader(const json& j, Ctx& ctx, std::string path, bool strict)
      : j_(j), ctx_(ctx), path_(std::move(path)), strict_(strict) {
    if (!j_.is_object()) {
      if (path_.empty()) {
        set_error("expected a JSON object, got " + type_name(j_));
      } else {
        set_error("field \"" + path_.substr(0, path_.size() - 1) + "\": expected an object, got " + type_name(j_));
      }
    }
  }

  bool ok() const { return !ctx_.error.has_value(); }
  Ctx& ctx() { return ctx_; }
  std::string path(std::string_view key) const { return path_ + std::string(key); }

  // The value for `key`, or nullptr when absent or null (null means "not set", as Go clients send).
  const json* get(std::string_view key) {
    if (!ok() || !j_.is_object()) return nullptr;
    seen_.insert(std::string(key));
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(std::string_view key) const {
    if (!j_.is_object()) return false;
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }

  void fail(std::string_view key, const std::string& why) { set_error("field \"" + path(key) + "\": " + why); }
  void fail_type(std::string_view key, const char* expected, const json& got) {
    fail(key, std::string("expected ") + expected + ", got " + type_name(got));
  }

  void str(std::string_view key, std::string& out) {
    if (const json* v = get(key)) {
      if (!v->is_string()) return fail_type(key, "a string", *v);
      out = v->get<std::string>();
    }
  }
  void boolean(std::string_view key, bool& out) {
    if (const json* v = get(key)) {
      if (!v->is_boolean()) return fail_type(key, "a boolean", *v);
      out = v->get<bool>();
    }
  }
  void i64(std::string_view key, std::int64_t& out, bool non_negative = false) {
    if (const json* v = get(key)) {
      if (!v->is_number_integer()) return fail_type(key, "an integer", *v);
      if (v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
        return fail(key, "out of range");
      }
      const auto value = v->get<std::int64_t>();
      if (non_negative && value < 0) return fail(key, "must not be negative");
      out = value;
    }
  }
  void i32(std::string_view key, int& out) {
    std::int64_t value = out;
    i64(key, value);
    if (!ok()) return;
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
      return fail(key, "out of range");
    }
    out = static_cast<int>(value);
  }
  void u64(std::string_view key, std::uint64_t& out) {
    if (const json* v = get(key)) {
      if (!v->is_number_integer()) return fail_type(key, "an integer", *v);
      if (!v->is_number_unsigned() && v->get<std::int64_t>() < 0) return fail(key, "must not be negative");
      out = v->get<std::uint64_t>();
    }
  }
  void string_map(std::string_view key, StringMap& out) {
    if (const json* v = get(key)) {
      if (!v->is_object()) return fail_type(key, "an object of strings", *v);
      StringMap m;
      for (const auto& [k, val] : v->items()) {
        if (!val.is_string()) return fail(std::string(key) + "." + k, "expected a string, got " + type_name(val));
        m.emplace(k, val.get<std::string>());
      }
      out = std::move(m);
    }
  }
  void string_list(std::string_view key, std::vector<std::string>& out) {
    if (const json* v = get(key)) {
      if (!v->is_array()) return fail_type(key, "an array of strings", *v);
      std::vector<std::string> list;
      for (std::size_t i = 0; i < v->size(); ++i) {
        const json& item = (*v)[i];
        if (!item.is_string()) {
          return fail(std::string(key) + "[" + std::to_string(i) + "]", "expected a string, got " + type_name(item));
        }
        list.push_back(item.get<std::string>());
      }
      out = std::move(list);
    }
  }
  void duration(std::string_view key, Duration& out) {
    if (const json* v = get(key)) {
      if (!v->is_string()) return fail_type(key, "a duration string like \"30s\"", *v);
      auto d = parse_duration(v->get<std::string>());
      if (!d) return fail(key, d.error());
      out = *d;
    }
  }
  void time(std::string_view key, Time& out) {
    if (const json* v = get(key)) {
      if (!v->is_string()) return fail_type(key, "an RFC 3339 time string", *v);
      auto t = parse_time(v->get<std::string>());
      if (!t) return fail(key, t.error());
      out = *t;
    }
  }
  template <class E>
  void enumeration(std::string_view key, E& out, std::optional<E> (*parse)(std::string_view), const char* what) {
    if (const json* v = get(key)) {
      if (!v->is_string()) return fail_type(key, "a string", *v);
      const auto text = v->get<std::string>();
      auto parsed = parse(text);
      if (!parsed) return fail(key, std::string("unknown ") + what + " \"" + text + "\"");
      out = *parsed;
    }
  }
  // Calls f(Reader&) for a nested object.
  template <class F>
  void object(std::string_view key, F&& f) {
    if (const json* v = get(key)) {
      Reader child(*v, ctx_, path(key) + ".", strict_);
      if (!child.ok()) return;
      f(child);
      child.finish();
    }
  }
  // Calls f(Reader&, index) for each object of an array.
  template <class F>
  void object_array(std::string_view key, F&& f) {
    if (const json* v = get(key)) {
      if (!v->is_array()) return fail_type(key, "an array", *v);
      for (std::size_t i = 0; i < v->size() && ok(); ++i) {
        Reader child((*v)[i], ctx_, path(key) + "[" + std::to_string(i) + "].", strict_);
        if (!child.ok()) return;
        f(child, i);
        child.finish();
      }
    }
  }
  // Calls f(Reader&, name) for each object value of a map.
  template <class F>
  void object_map(std::string_view key, F&& f) {
    if (const json* v = get(key)) {
      if (!v->is_object()) return fail_type(key, "an object", *v);
      for (const auto& [name, item] : v->items()) {
        if (!ok()) return;
        Reader child(item, ctx_, path(key) + "." + name + ".", strict_);
        if (!child.ok()) return;
        f(child, name);
        child.finish();
      }
    }
  }

  void required(std::string_view key, const char* what = "required") {
    if (ok() && !has(key)) fail(key, what);
  }

  // Strict readers reject fields they did not read.
  void finish() {
    if (!ok() || !strict_ || !j_.is_object()) return;
    for (const auto& [key, value] : j_.items()) {
      if (seen_.count(key) == 0) {
        set_error("unknown field \"" + path(key) + "\"");
        return;
      }
    }
  }

 private:
  void set_error(std::string message) {
    if (!ctx_.error) ctx_.error = ctx_.object + ": " + std::move(message);
  }

  const json& j_;
  Ctx& ctx_;
  std::string path_;
  bool strict_;
  std::set<std::string> seen_;
};

std::string object_name(std::string_view kind, const json& j, std::string_view id_key) {
  if (j.is_object()) {
    auto it = j.find(id_key);
    if (it != j.end() && it->is_string() && !it->get<std::string>().empty()) {
      std::string id = it->get<std::string>().substr(0, 128);
      return std::string(kind) + " \"" + id + "\"";
    }
  }
  return std::string(kind);
}

// ------------------------------------------------------------------ encoding helpers

json string_map_json(const StringMap& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

// Values under credential-looking keys are shown as [REDACTED] (env vars, event details).
json redacted_map_json(const StringMap& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = log::is_secret_key(k) ? std::string(kRedacted) : v;
  return out;
}

void put_time(json& out, const char* key, Time t) {
  if (is_set(t)) out[key] = format_time(t);
}

json topology_json(const Topology& t) { return json{{"Segments", string_map_json(t.segments)}}; }

json topologies_json(const std::vector<Topology>& ts) {
  json out = json::array();
  for (const auto& t : ts) out.push_back(topology_json(t));
  return out;
}

json topology_request_json(const TopologyRequest& r) {
  if (r.empty()) return nullptr;
  return json{{"Required", topologies_json(r.required)}, {"Preferred", topologies_json(r.preferred)}};
}

json mount_options_json(const MountOptions& m, bool redact) {
  json flags = json::array();
  if (redact) {
    if (!m.mount_flags.empty()) flags.push_back(kRedacted);
  } else {
    for (const auto& f : m.mount_flags) flags.push_back(f);
  }
  return json{{"FSType", m.fs_type}, {"MountFlags", flags}};
}

json capabilities_json(const std::vector<VolumeCapability>& caps) {
  json out = json::array();
  for (const auto& c : caps) {
    out.push_back({{"AccessMode", to_string(c.access_mode)}, {"AttachmentMode", to_string(c.attachment_mode)}});
  }
  return out;
}

json claim_json(const Claim& c, bool storage) {
  json out = {
      {"AllocationID", c.allocation_id},
      {"NodeID", c.node_id},
      {"ExternalNodeID", c.external_node_id},
      {"Mode", to_string(c.mode)},
      {"AccessMode", to_string(c.access_mode)},
      {"AttachmentMode", to_string(c.attachment_mode)},
      {"State", to_string(c.state)},
      {"LastError", c.last_error},
  };
  if (c.controller_publish != ControllerPublish::unknown) out["ControllerPublish"] = to_string(c.controller_publish);
  put_time(out, "NextAttempt", c.next_attempt);
  put_time(out, "CreateTime", c.create_time);
  put_time(out, "UpdateTime", c.update_time);
  if (storage) out["PublishContext"] = string_map_json(c.publish_context);
  return out;
}

// Fields common to both forms of a volume.
json volume_base_json(const Volume& v, bool storage) {
  json out = {
      {"ID", v.id},
      {"Name", v.name},
      {"PluginID", v.plugin_id},
      {"ExternalID", v.external_id},
      {"Provider", v.provider},
      {"ProviderVersion", v.provider_version},
      {"RequestedCapabilities", capabilities_json(v.requested_capabilities)},
      {"MountOptions", mount_options_json(v.mount_options, !storage)},
      {"Parameters", string_map_json(v.parameters)},
      {"Context", string_map_json(v.context)},
      {"RequestedCapacityMin", v.requested_capacity_min},
      {"RequestedCapacityMax", v.requested_capacity_max},
      {"Capacity", v.capacity},
      {"RequestedTopologies", topology_request_json(v.requested_topologies)},
      {"Topologies", topologies_json(v.topologies)},
      {"SnapshotID", v.snapshot_id},
      {"CloneID", v.clone_id},
      {"AccessMode", to_string(v.access_mode)},
      {"AttachmentMode", to_string(v.attachment_mode)},
      {"Deleting", v.deleting},
      {"Deregistering", v.deregistering},
      {"CreateIndex", v.create_index},
      {"ModifyIndex", v.modify_index},
  };
  json claims = json::array();
  for (const auto& [alloc, c] : v.claims) claims.push_back(claim_json(c, storage));
  out["Claims"] = std::move(claims);
  if (storage) out["Secrets"] = string_map_json(v.secrets);
  return out;
}

json controller_info_json(const ControllerInfo& c) {
  return {
      {"SupportsCreateDelete", c.supports_create_delete},
      {"SupportsAttachDetach", c.supports_attach_detach},
      {"SupportsListVolumes", c.supports_list_volumes},
      {"SupportsGetCapacity", c.supports_get_capacity},
      {"SupportsCreateDeleteSnapshot", c.supports_create_delete_snapshot},
      {"SupportsListSnapshots", c.supports_list_snapshots},
      {"SupportsClone", c.supports_clone},
      {"SupportsReadOnlyAttach", c.supports_read_only_attach},
      {"SupportsExpand", c.supports_expand},
      {"SupportsListVolumesAttachedNodes", c.supports_list_volumes_attached_nodes},
      {"SupportsCondition", c.supports_condition},
      {"SupportsGet", c.supports_get},
  };
}

json node_info_json(const NodeInfo& n) {
  return {
      {"ID", n.id},
      {"MaxVolumes", n.max_volumes},
      {"AccessibleTopology",
       n.accessible_topology.empty() ? json(nullptr) : json{{"Segments", string_map_json(n.accessible_topology)}}},
      {"RequiresNodeStageVolume", n.requires_node_stage_volume},
      {"SupportsStats", n.supports_stats},
      {"SupportsExpand", n.supports_expand},
      {"SupportsCondition", n.supports_condition},
  };
}

json instance_json(const PluginInstance& i) {
  json out = {
      {"PluginID", i.plugin_id},
      {"NodeID", i.node_id},
      {"Type", to_string(i.type)},
      {"Healthy", i.healthy},
      {"HealthDescription", i.health_description},
      {"Provider", i.provider},
      {"Version", i.version},
      {"RequiresControllerPlugin", i.requires_controller_plugin},
      {"RequiresTopologies", i.requires_topologies},
      {"OnlineExpansion", i.online_expansion},
      {"OfflineExpansion", i.offline_expansion},
      {"ControllerInfo", i.controller_info ? controller_info_json(*i.controller_info) : json(nullptr)},
      {"NodeInfo", i.node_info ? node_info_json(*i.node_info) : json(nullptr)},
  };
  put_time(out, "UpdateTime", i.update_time);
  return out;
}

json instances_json(const std::map<std::string, PluginInstance>& m) {
  json out = json::object();
  for (const auto& [node, i] : m) out[node] = instance_json(i);
  return out;
}

json plugin_json(const Plugin& p) {
  return {
      {"ID", p.id},
      {"Provider", p.provider},
      {"Version", p.version},
      {"ControllerRequired", p.controller_required},
      {"Controllers", instances_json(p.controllers)},
      {"Nodes", instances_json(p.nodes)},
      {"ControllersHealthy", p.controllers_healthy},
      {"ControllersExpected", p.controllers_expected},
      {"NodesHealthy", p.nodes_healthy},
      {"NodesExpected", p.nodes_expected},
      {"CreateIndex", p.create_index},
      {"ModifyIndex", p.modify_index},
  };
}

json node_event_json(const NodeEvent& e, bool redact) {
  json out = {{"Subsystem", e.subsystem},
              {"Message", e.message},
              {"Details", redact ? redacted_map_json(e.details) : string_map_json(e.details)}};
  put_time(out, "Timestamp", e.time);
  return out;
}

json node_json(const Node& n, bool redact) {
  json plugins = json::object();
  for (const auto& [id, i] : n.plugins) plugins[id] = instance_json(i);
  json events = json::array();
  for (const auto& e : n.events) events.push_back(node_event_json(e, redact));
  json out = {
      {"ID", n.id},
      {"Name", n.name},
      {"Address", n.address},
      {"Status", to_string(n.status)},
      {"Attributes", string_map_json(n.attributes)},
      {"Plugins", std::move(plugins)},
      {"Events", std::move(events)},
      {"CreateIndex", n.create_index},
      {"ModifyIndex", n.modify_index},
  };
  put_time(out, "LastHeartbeat", n.last_heartbeat);
  return out;
}

json volume_request_json(const VolumeRequest& r, bool redact) {
  return {
      {"Type", r.type},
      {"Source", r.source},
      {"ReadOnly", r.read_only},
      {"AccessMode", to_string(r.access_mode)},
      {"AttachmentMode", to_string(r.attachment_mode)},
      {"PerAlloc", r.per_alloc},
      {"MountOptions", mount_options_json(r.mount_options, redact)},
  };
}

json task_json(const Task& t, bool redact) {
  json out = {
      {"Command", t.command},
      {"Args", t.args},
      {"Env", redact ? redacted_map_json(t.env) : string_map_json(t.env)},
      {"KillTimeout", format_duration(t.kill_timeout)},
  };
  // SecretEnv: API output names the keys only, every value [REDACTED]; storage keeps the values
  // (sealed by the control plane's state layer, services/controlplane/secrets/).
  if (!t.secret_env.empty()) {
    json& secret = out["SecretEnv"] = json::object();
    for (const auto& [k, v] : t.secret_env) secret[k] = redact ? json(kRedacted) : json(v);
  }
  return out;
}

json allocation_json(const Allocation& a, bool redact) {
  json volumes = json::object();
  for (const auto& [name, r] : a.volumes) volumes[name] = volume_request_json(r, redact);
  json events = json::array();
  for (const auto& e : a.events) {
    json ev = {{"Type", e.type}, {"Message", e.message}};
    put_time(ev, "Time", e.time);
    events.push_back(std::move(ev));
  }
  return {
      {"ID", a.id},
      {"Name", a.name},
      {"NodeID", a.node_id},
      {"DesiredStatus", to_string(a.desired_status)},
      {"ClientStatus", to_string(a.client_status)},
      {"Volumes", std::move(volumes)},
      {"Task", a.task ? task_json(*a.task, redact) : json(nullptr)},
      {"StopAfterClientDisconnect",
       a.stop_after_client_disconnect.count() > 0 ? json(format_duration(a.stop_after_client_disconnect))
                                                  : json(nullptr)},
      {"Index", a.index},
      {"Events", std::move(events)},
      {"CreateIndex", a.create_index},
      {"ModifyIndex", a.modify_index},
  };
}

json event_json(const Event& e, bool redact) {
  json out = {
      {"Index", e.index},
      {"Topic", e.topic},
      {"Type", e.type},
      {"Key", e.key},
      {"Message", e.message},
      {"Details", redact ? redacted_map_json(e.details) : string_map_json(e.details)},
  };
  put_time(out, "Time", e.time);
  return out;
}

// ------------------------------------------------------------------ shared decoders

void read_topology(Reader& r, Topology& t) { r.string_map("Segments", t.segments); }

void read_topologies(Reader& r, std::string_view key, std::vector<Topology>& out) {
  std::vector<Topology> list;
  r.object_array(key, [&](Reader& c, std::size_t) { read_topology(c, list.emplace_back()); });
  if (r.ok()) out = std::move(list);
}

void read_topology_request(Reader& r, TopologyRequest& out) {
  r.object("RequestedTopologies", [&](Reader& c) {
    read_topologies(c, "Required", out.required);
    read_topologies(c, "Preferred", out.preferred);
  });
}

void read_mount_options(Reader& r, MountOptions& out) {
  r.object("MountOptions", [&](Reader& c) {
    c.str("FSType", out.fs_type);
    c.string_list("MountFlags", out.mount_flags);
  });
}

// `require_known`: API input must name a mode; storage may hold "" (unset).
void read_capabilities(Reader& r, std::vector<VolumeCapability>& out, bool require_known) {
  std::vector<VolumeCapability> caps;
  r.object_array("RequestedCapabilities", [&](Reader& c, std::size_t) {
    auto& cap = caps.emplace_back();
    c.enumeration("AccessMode", cap.access_mode, parse_access_mode, "access mode");
    c.enumeration("AttachmentMode", cap.attachment_mode, parse_attachment_mode, "attachment mode");
    if (require_known && c.ok() && cap.access_mode == AccessMode::unknown) c.fail("AccessMode", "required");
    if (require_known && c.ok() && cap.attachment_mode == AttachmentMode::unknown) {
      c.fail("AttachmentMode", "required");
    }
  });
  if (r.ok()) out = std::move(caps);
}

void read_claim(Reader& r, Claim& c) {
  r.str("AllocationID", c.allocation_id);
  r.str("NodeID", c.node_id);
  r.str("ExternalNodeID", c.external_node_id);
  r.enumeration("Mode", c.mode, parse_claim_mode, "claim mode");
  r.enumeration("AccessMode", c.access_mode, parse_access_mode, "access mode");
  r.enumeration("AttachmentMode", c.attachment_mode, parse_attachment_mode, "attachment mode");
  r.enumeration("State", c.state, parse_claim_state, "claim state");
  r.string_map("PublishContext", c.publish_context);
  r.enumeration("ControllerPublish", c.controller_publish, parse_controller_publish, "controller publish");
  r.str("LastError", c.last_error);
  r.time("NextAttempt", c.next_attempt);
  r.time("CreateTime", c.create_time);
  r.time("UpdateTime", c.update_time);
}

void read_controller_info(Reader& r, ControllerInfo& c) {
  r.boolean("SupportsCreateDelete", c.supports_create_delete);
  r.boolean("SupportsAttachDetach", c.supports_attach_detach);
  r.boolean("SupportsListVolumes", c.supports_list_volumes);
  r.boolean("SupportsGetCapacity", c.supports_get_capacity);
  r.boolean("SupportsCreateDeleteSnapshot", c.supports_create_delete_snapshot);
  r.boolean("SupportsListSnapshots", c.supports_list_snapshots);
  r.boolean("SupportsClone", c.supports_clone);
  r.boolean("SupportsReadOnlyAttach", c.supports_read_only_attach);
  r.boolean("SupportsExpand", c.supports_expand);
  r.boolean("SupportsListVolumesAttachedNodes", c.supports_list_volumes_attached_nodes);
  r.boolean("SupportsCondition", c.supports_condition);
  r.boolean("SupportsGet", c.supports_get);
}

void read_node_info(Reader& r, NodeInfo& n) {
  r.str("ID", n.id);
  r.i64("MaxVolumes", n.max_volumes, true);
  r.object("AccessibleTopology", [&](Reader& c) { c.string_map("Segments", n.accessible_topology); });
  r.boolean("RequiresNodeStageVolume", n.requires_node_stage_volume);
  r.boolean("SupportsStats", n.supports_stats);
  r.boolean("SupportsExpand", n.supports_expand);
  r.boolean("SupportsCondition", n.supports_condition);
}

void read_instance(Reader& r, PluginInstance& i) {
  r.str("PluginID", i.plugin_id);
  r.str("NodeID", i.node_id);
  r.enumeration("Type", i.type, parse_plugin_type, "plugin type");
  r.boolean("Healthy", i.healthy);
  r.str("HealthDescription", i.health_description);
  r.str("Provider", i.provider);
  r.str("Version", i.version);
  r.boolean("RequiresControllerPlugin", i.requires_controller_plugin);
  r.boolean("RequiresTopologies", i.requires_topologies);
  r.boolean("OnlineExpansion", i.online_expansion);
  r.boolean("OfflineExpansion", i.offline_expansion);
  r.object("ControllerInfo", [&](Reader& c) { read_controller_info(c, i.controller_info.emplace()); });
  r.object("NodeInfo", [&](Reader& c) { read_node_info(c, i.node_info.emplace()); });
  r.time("UpdateTime", i.update_time);
}

void read_instances(Reader& r, std::string_view key, std::map<std::string, PluginInstance>& out) {
  r.object_map(key, [&](Reader& c, const std::string& node) { read_instance(c, out[node]); });
}

void read_volume_request(Reader& r, VolumeRequest& v) {
  r.str("Type", v.type);
  r.str("Source", v.source);
  r.boolean("ReadOnly", v.read_only);
  r.enumeration("AccessMode", v.access_mode, parse_access_mode, "access mode");
  r.enumeration("AttachmentMode", v.attachment_mode, parse_attachment_mode, "attachment mode");
  r.boolean("PerAlloc", v.per_alloc);
  read_mount_options(r, v.mount_options);
}

void read_task(Reader& r, Task& t) {
  r.str("Command", t.command);
  r.string_list("Args", t.args);
  r.string_map("Env", t.env);
  r.string_map("SecretEnv", t.secret_env);
  r.duration("KillTimeout", t.kill_timeout);
}

template <class T>
Expected<T> finish(Ctx& ctx, T value) {
  if (ctx.error) return error(*ctx.error);
  return value;
}

void check_id(Reader& r, std::string_view key, IdKind kind, const std::string& id) {
  if (!r.ok() || id.empty()) return;
  if (auto s = validate_id(kind, id); !s) r.fail(key, s.error());
}

}  // namespace

// ------------------------------------------------------------------ API output

json to_api_json(const Volume& v) {
  json out = volume_base_json(v, false);
  out["Schedulable"] = v.schedulable;
  out["ControllerRequired"] = v.controller_required;
  out["ControllersHealthy"] = v.controllers_healthy;
  out["ControllersExpected"] = v.controllers_expected;
  out["NodesHealthy"] = v.nodes_healthy;
  out["NodesExpected"] = v.nodes_expected;
  out["CurrentReaders"] = current_readers(v);
  out["CurrentWriters"] = current_writers(v);
  // Nomad shape: alloc id -> stub, for taken claims only.
  json read = json::object(), write = json::object();
  for (const auto& [alloc, c] : v.claims) {
    if (c.state != ClaimState::taken) continue;
    (c.mode == ClaimMode::write ? write : read)[alloc] = json{{"ID", alloc}, {"NodeID", c.node_id}};
  }
  out["ReadAllocs"] = std::move(read);
  out["WriteAllocs"] = std::move(write);
  return out;
}

json to_api_json(const Claim& c) { return claim_json(c, false); }
json to_api_json(const Plugin& p) { return plugin_json(p); }
json to_api_json(const PluginInstance& i) { return instance_json(i); }
json to_api_json(const Node& n) { return node_json(n, true); }
json to_api_json(const Allocation& a) { return allocation_json(a, true); }
json to_api_json(const Event& e) { return event_json(e, true); }
json to_api_json(const MountOptions& m) { return mount_options_json(m, true); }

json to_api_stub(const Volume& v) {
  return {
      {"ID", v.id},
      {"Name", v.name},
      {"ExternalID", v.external_id},
      {"PluginID", v.plugin_id},
      {"Provider", v.provider},
      {"Topologies", topologies_json(v.topologies)},
      {"AccessMode", to_string(v.access_mode)},
      {"AttachmentMode", to_string(v.attachment_mode)},
      {"CurrentReaders", current_readers(v)},
      {"CurrentWriters", current_writers(v)},
      {"Schedulable", v.schedulable},
      {"Deleting", v.deleting},
      {"Deregistering", v.deregistering},
      {"ControllerRequired", v.controller_required},
      {"ControllersHealthy", v.controllers_healthy},
      {"ControllersExpected", v.controllers_expected},
      {"NodesHealthy", v.nodes_healthy},
      {"NodesExpected", v.nodes_expected},
      {"CreateIndex", v.create_index},
      {"ModifyIndex", v.modify_index},
  };
}

json to_api_stub(const Plugin& p) {
  return {
      {"ID", p.id},
      {"Provider", p.provider},
      {"ControllerRequired", p.controller_required},
      {"ControllersHealthy", p.controllers_healthy},
      {"ControllersExpected", p.controllers_expected},
      {"NodesHealthy", p.nodes_healthy},
      {"NodesExpected", p.nodes_expected},
      {"CreateIndex", p.create_index},
      {"ModifyIndex", p.modify_index},
  };
}

json to_api_stub(const Node& n) {
  json out = {
      {"ID", n.id},
      {"Name", n.name},
      {"Address", n.address},
      {"Status", to_string(n.status)},
      {"CreateIndex", n.create_index},
      {"ModifyIndex", n.modify_index},
  };
  put_time(out, "LastHeartbeat", n.last_heartbeat);
  return out;
}

json to_api_stub(const Allocation& a) {
  return {
      {"ID", a.id},
      {"Name", a.name},
      {"NodeID", a.node_id},
      {"DesiredStatus", to_string(a.desired_status)},
      {"ClientStatus", to_string(a.client_status)},
      {"CreateIndex", a.create_index},
      {"ModifyIndex", a.modify_index},
  };
}

// ------------------------------------------------------------------ API input

Expected<MountOptions> mount_options_from_api(const json& j, std::string_view context) {
  Ctx ctx{std::string(context), {}};
  MountOptions out;
  Reader r(j, ctx, "", true);
  r.str("FSType", out.fs_type);
  r.string_list("MountFlags", out.mount_flags);
  r.finish();
  return finish(ctx, std::move(out));
}

Expected<Volume> volume_from_api(const json& j, bool require_external_id) {
  Ctx ctx{object_name("volume", j, "ID"), {}};
  Volume v;
  Reader r(j, ctx, "", true);
  r.str("ID", v.id);
  r.str("Name", v.name);
  r.str("PluginID", v.plugin_id);
  r.str("ExternalID", v.external_id);
  read_capabilities(r, v.requested_capabilities, true);
  // Nomad's legacy single capability at top level; folded into RequestedCapabilities.
  VolumeCapability legacy;
  r.enumeration("AccessMode", legacy.access_mode, parse_access_mode, "access mode");
  r.enumeration("AttachmentMode", legacy.attachment_mode, parse_attachment_mode, "attachment mode");
  read_mount_options(r, v.mount_options);
  r.string_map("Secrets", v.secrets);
  r.string_map("Parameters", v.parameters);
  r.string_map("Context", v.context);
  r.i64("RequestedCapacityMin", v.requested_capacity_min, true);
  r.i64("RequestedCapacityMax", v.requested_capacity_max, true);
  read_topology_request(r, v.requested_topologies);
  r.str("SnapshotID", v.snapshot_id);
  r.str("CloneID", v.clone_id);
  r.finish();

  if (r.ok() && v.id.empty()) r.fail("ID", "required");
  check_id(r, "ID", IdKind::volume, v.id);
  if (r.ok() && v.plugin_id.empty()) r.fail("PluginID", "required");
  check_id(r, "PluginID", IdKind::plugin, v.plugin_id);
  if (r.ok() && require_external_id && v.external_id.empty()) r.fail("ExternalID", "required");
  if (r.ok() && !require_external_id && !v.external_id.empty()) {
    r.fail("ExternalID", "must not be set when creating a volume (the plugin assigns it)");
  }
  if (r.ok() && (legacy.access_mode != AccessMode::unknown || legacy.attachment_mode != AttachmentMode::unknown)) {
    if (legacy.access_mode == AccessMode::unknown) r.fail("AccessMode", "required with AttachmentMode");
    if (r.ok() && legacy.attachment_mode == AttachmentMode::unknown) {
      r.fail("AttachmentMode", "required with AccessMode");
    }
    if (r.ok() && !has_capability(v, legacy.access_mode, legacy.attachment_mode)) {
      v.requested_capabilities.push_back(legacy);
    }
  }
  if (r.ok() && v.requested_capabilities.empty()) {
    r.fail("RequestedCapabilities", "at least one {AccessMode, AttachmentMode} is required");
  }
  if (r.ok() && v.requested_capacity_max != 0 && v.requested_capacity_max < v.requested_capacity_min) {
    r.fail("RequestedCapacityMax", "smaller than RequestedCapacityMin");
  }
  if (r.ok() && !v.snapshot_id.empty() && !v.clone_id.empty()) {
    r.fail("CloneID", "a volume is created from a snapshot or a clone, not both");
  }
  if (r.ok() && v.name.empty()) v.name = v.id;
  return finish(ctx, std::move(v));
}

Expected<std::vector<Volume>> volumes_request_from_api(const json& j, bool require_external_id) {
  Ctx ctx{"request", {}};
  Reader r(j, ctx, "", true);
  const json* list = r.get("Volumes");
  r.finish();
  if (r.ok() && list == nullptr) r.fail("Volumes", "required");
  if (r.ok() && !list->is_array()) r.fail_type("Volumes", "an array", *list);
  if (r.ok() && list->empty()) r.fail("Volumes", "at least one volume is required");
  if (ctx.error) return error(*ctx.error);
  std::vector<Volume> out;
  for (const auto& item : *list) {
    auto v = volume_from_api(item, require_external_id);
    if (!v) return error(v.error());
    out.push_back(std::move(*v));
  }
  return out;
}

Expected<Allocation> allocation_from_api(const json& j) {
  Ctx ctx{object_name("allocation", j, "Name"), {}};
  Allocation a;
  Reader r(j, ctx, "", true);
  r.str("Name", a.name);
  r.str("NodeID", a.node_id);
  r.duration("StopAfterClientDisconnect", a.stop_after_client_disconnect);
  r.object_map("Volumes", [&](Reader& c, const std::string& name) {
    VolumeRequest req;
    req.name = name;
    read_volume_request(c, req);
    if (!c.ok()) return;
    if (name.empty()) return r.fail("Volumes", "volume request names must not be empty");
    if (req.type != "csi") return c.fail("Type", "unsupported volume type \"" + req.type + "\" (only \"csi\")");
    if (req.source.empty()) return c.fail("Source", "required");
    if (auto s = validate_volume_id(req.per_alloc ? per_alloc_volume_id(req.source, 0) : req.source); !s) {
      return c.fail("Source", s.error());
    }
    if (req.access_mode == AccessMode::unknown) return c.fail("AccessMode", "required");
    if (req.attachment_mode == AttachmentMode::unknown) return c.fail("AttachmentMode", "required");
    a.volumes.emplace(name, std::move(req));
  });
  r.object("Task", [&](Reader& c) {
    Task t;
    read_task(c, t);
    if (c.ok() && t.command.empty()) c.fail("Command", "required");
    a.task = std::move(t);
  });
  r.finish();
  check_id(r, "NodeID", IdKind::node, a.node_id);
  return finish(ctx, std::move(a));
}

Expected<Allocation> allocation_request_from_api(const json& j) {
  Ctx ctx{"request", {}};
  Reader r(j, ctx, "", true);
  const json* inner = r.get("Allocation");
  r.finish();
  if (r.ok() && inner == nullptr) r.fail("Allocation", "required");
  if (ctx.error) return error(*ctx.error);
  return allocation_from_api(*inner);
}

// ------------------------------------------------------------------ storage

json to_storage_json(const Volume& v) { return volume_base_json(v, true); }
json to_storage_json(const Claim& c) { return claim_json(c, true); }
json to_storage_json(const Plugin& p) { return plugin_json(p); }
json to_storage_json(const PluginInstance& i) { return instance_json(i); }
json to_storage_json(const Node& n) { return node_json(n, false); }
json to_storage_json(const Allocation& a) { return allocation_json(a, false); }
json to_storage_json(const Event& e) { return event_json(e, false); }

Expected<Volume> volume_from_storage(const json& j) {
  Ctx ctx{"stored " + object_name("volume", j, "ID"), {}};
  Volume v;
  Reader r(j, ctx, "", false);
  r.str("ID", v.id);
  r.str("Name", v.name);
  r.str("PluginID", v.plugin_id);
  r.str("ExternalID", v.external_id);
  r.str("Provider", v.provider);
  r.str("ProviderVersion", v.provider_version);
  read_capabilities(r, v.requested_capabilities, false);
  read_mount_options(r, v.mount_options);
  r.string_map("Secrets", v.secrets);
  r.string_map("Parameters", v.parameters);
  r.string_map("Context", v.context);
  r.i64("RequestedCapacityMin", v.requested_capacity_min);
  r.i64("RequestedCapacityMax", v.requested_capacity_max);
  r.i64("Capacity", v.capacity);
  read_topology_request(r, v.requested_topologies);
  read_topologies(r, "Topologies", v.topologies);
  r.str("SnapshotID", v.snapshot_id);
  r.str("CloneID", v.clone_id);
  r.enumeration("AccessMode", v.access_mode, parse_access_mode, "access mode");
  r.enumeration("AttachmentMode", v.attachment_mode, parse_attachment_mode, "attachment mode");
  r.object_array("Claims", [&](Reader& c, std::size_t) {
    Claim claim;
    read_claim(c, claim);
    if (c.ok() && claim.allocation_id.empty()) return c.fail("AllocationID", "required");
    v.claims[claim.allocation_id] = std::move(claim);
  });
  r.boolean("Deleting", v.deleting);
  r.boolean("Deregistering", v.deregistering);
  r.u64("CreateIndex", v.create_index);
  r.u64("ModifyIndex", v.modify_index);
  if (r.ok() && v.id.empty()) r.fail("ID", "required");
  return finish(ctx, std::move(v));
}

Expected<Claim> claim_from_storage(const json& j) {
  Ctx ctx{"stored " + object_name("claim", j, "AllocationID"), {}};
  Claim c;
  Reader r(j, ctx, "", false);
  read_claim(r, c);
  return finish(ctx, std::move(c));
}

Expected<Plugin> plugin_from_storage(const json& j) {
  Ctx ctx{"stored " + object_name("plugin", j, "ID"), {}};
  Plugin p;
  Reader r(j, ctx, "", false);
  r.str("ID", p.id);
  r.str("Provider", p.provider);
  r.str("Version", p.version);
  r.boolean("ControllerRequired", p.controller_required);
  read_instances(r, "Controllers", p.controllers);
  read_instances(r, "Nodes", p.nodes);
  r.i32("ControllersHealthy", p.controllers_healthy);
  r.i32("ControllersExpected", p.controllers_expected);
  r.i32("NodesHealthy", p.nodes_healthy);
  r.i32("NodesExpected", p.nodes_expected);
  r.u64("CreateIndex", p.create_index);
  r.u64("ModifyIndex", p.modify_index);
  if (r.ok() && p.id.empty()) r.fail("ID", "required");
  return finish(ctx, std::move(p));
}

Expected<PluginInstance> plugin_instance_from_storage(const json& j) {
  Ctx ctx{"stored " + object_name("plugin instance", j, "PluginID"), {}};
  PluginInstance i;
  Reader r(j, ctx, "", false);
  read_instance(r, i);
  return finish(ctx, std::move(i));
}

Expected<Node> node_from_storage(const json& j) {
  Ctx ctx{"stored " + object_name("node", j, "ID"), {}};
  Node n;
  Reader r(j, ctx, "", false);
  r.str("ID", n.id);
  r.str("Name", n.name);
  r.str("Address", n.address);
  r.enumeration("Status", n.status, parse_node_status, "node status");
  r.string_map("Attributes", n.attributes);
  read_instances(r, "Plugins", n.plugins);
  r.time("LastHeartbeat", n.last_heartbeat);
  r.object_array("Events", [&](Reader& c, std::size_t) {
    auto& e = n.events.emplace_back();
    c.time("Timestamp", e.time);
    c.str("Subsystem", e.subsystem);
    c.str("Message", e.message);
    c.string_map("Details", e.details);
  });
  r.u64("CreateIndex", n.create_index);
  r.u64("ModifyIndex", n.modify_index);
  if (r.ok() && n.id.empty()) r.fail("ID", "required");
  return finish(ctx, std::move(n));
}

Expected<Allocation> allocation_from_storage(const json& j) {
  Ctx ctx{"stored " + object_name("allocation", j, "ID"), {}};
  Allocation a;
  Reader r(j, ctx, "", false);
  r.str("ID", a.id);
  r.str("Name", a.name);
  r.str("NodeID", a.node_id);
  r.enumeration("DesiredStatus", a.desired_status, parse_desired_status, "desired status");
  r.enumeration("ClientStatus", a.client_status, parse_client_status, "client status");
  r.object_map("Volumes", [&](Reader& c, const std::string& name) {
    VolumeRequest req;
    req.name = name;
    read_volume_request(c, req);
    a.volumes[name] = std::move(req);
  });
  r.object("Task", [&](Reader& c) { read_task(c, a.task.emplace()); });
  r.duration("StopAfterClientDisconnect", a.stop_after_client_disconnect);
  r.i32("Index", a.index);
  r.object_array("Events", [&](Reader& c, std::size_t) {
    auto& e = a.events.emplace_back();
    c.time("Time", e.time);
    c.str("Type", e.type);
    c.str("Message", e.message);
  });
  r.u64("CreateIndex", a.create_index);
  r.u64("ModifyIndex", a.modify_index);
  if (r.ok() && a.id.empty()) r.fail("ID", "required");
  return finish(ctx, std::move(a));
}

Expected<Event> event_from_storage(const json& j) {
  Ctx ctx{"stored event", {}};
  Event e;
  Reader r(j, ctx, "", false);
  r.u64("Index", e.index);
  r.time("Time", e.time);
  r.str("Topic", e.topic);
  r.str("Type", e.type);
  r.str("Key", e.key);
  r.str("Message", e.message);
  r.string_map("Details", e.details);
  return finish(ctx, std::move(e));
}

}  // namespace mooring::domain
