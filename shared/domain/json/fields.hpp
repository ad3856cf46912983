// One table of field descriptors per type drives all of its JSON: API output, list stubs,
// storage (both ways) and strict API input. A row names the JSON key, the member, where the
// field appears and how it is shown; the member's C++ type picks the reader and the writer.
// Tables are read in row order, so the first error a decoder reports follows the table.
#pragma once

#include "shared/domain/allocation.hpp"
#include "shared/domain/event.hpp"
#include "shared/domain/json/reader.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/node_identity.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/volume.hpp"

#include <algorithm>
#include <charconv>
#include <span>
#include <type_traits>
#include <utility>

namespace mooring::domain::codec {

// Where a field appears (a bit set).
enum Where : unsigned {
  kApi = 1,    // API output of the full object
  kStub = 2,   // API list stubs
  kStore = 4,  // storage, written and read
  kInput = 8,  // accepted in strict API input
};
inline constexpr unsigned kOut = kApi | kStore;
inline constexpr unsigned kAll = kApi | kStub | kStore;

enum class View { api, stub, storage };

// Nested objects of a stub are shown as in the full object.
inline View nested(View v) { return v == View::stub ? View::api : v; }
inline unsigned bit(View v) { return v == View::api ? kApi : v == View::stub ? kStub : kStore; }
inline unsigned read_bit(const Reader& r) { return r.strict() ? kInput : kStore; }

struct Opts {
  bool redact = false;           // API output: credential-keyed values, or every mount flag, masked
  bool null_when_empty = false;  // written as null when empty (a zero duration, an empty request)
  bool omit_when_unset = false;  // an enum at its first ("unknown") value is left out
  unsigned non_negative = 0;     // kInput and/or kStore: a negative number is an error there
  // A map of secrets: left out when empty; API output names the keys only, every value masked
  // (storage keeps them; the control plane's state layer seals them, services/controlplane/secrets).
  bool secret = false;
};

template <class T>
struct Field {
  std::string_view key;
  unsigned where;
  Opts opts;
  std::optional<json> (*write)(const Field& f, const T& obj, View view);  // nullopt: key left out
  void (*read)(const Field& f, Reader& r, T& obj);                        // nullptr: never read
  // The text of what `write` returns, appended to `out` (see write_text); false: key left out.
  bool (*write_text)(const Field& f, const T& obj, View view, std::string& out);
};

// ---- each type's table, defined next to its codec (json/<type>.cpp) ----
template <class T>
using Table = std::span<const Field<T>>;
Table<VolumeCapability> fields_of(std::type_identity<VolumeCapability>);
Table<MountOptions> fields_of(std::type_identity<MountOptions>);
Table<Topology> fields_of(std::type_identity<Topology>);
Table<VolumeUsage> fields_of(std::type_identity<VolumeUsage>);
Table<VolumeCondition> fields_of(std::type_identity<VolumeCondition>);
Table<VolumeOwnership> fields_of(std::type_identity<VolumeOwnership>);
Table<VolumeModification> fields_of(std::type_identity<VolumeModification>);
Table<TopologyRequest> fields_of(std::type_identity<TopologyRequest>);
Table<Claim> fields_of(std::type_identity<Claim>);
Table<Volume> fields_of(std::type_identity<Volume>);
Table<ControllerInfo> fields_of(std::type_identity<ControllerInfo>);
Table<NodeInfo> fields_of(std::type_identity<NodeInfo>);
Table<PluginInstance> fields_of(std::type_identity<PluginInstance>);
Table<Plugin> fields_of(std::type_identity<Plugin>);
Table<NodeEvent> fields_of(std::type_identity<NodeEvent>);
Table<DrainStrategy> fields_of(std::type_identity<DrainStrategy>);
Table<DrainStatus> fields_of(std::type_identity<DrainStatus>);
Table<Node> fields_of(std::type_identity<Node>);
Table<NodeCertificate> fields_of(std::type_identity<NodeCertificate>);
Table<Introduction> fields_of(std::type_identity<Introduction>);
Table<NodeIdentity> fields_of(std::type_identity<NodeIdentity>);
Table<VolumeRequest> fields_of(std::type_identity<VolumeRequest>);
Table<TaskCSIPlugin> fields_of(std::type_identity<TaskCSIPlugin>);
Table<TaskResources> fields_of(std::type_identity<TaskResources>);
Table<Task> fields_of(std::type_identity<Task>);
Table<SystemNodeState> fields_of(std::type_identity<SystemNodeState>);
Table<RolloutNode> fields_of(std::type_identity<RolloutNode>);
Table<Rollout> fields_of(std::type_identity<Rollout>);
Table<TaskEvent> fields_of(std::type_identity<TaskEvent>);
Table<Allocation> fields_of(std::type_identity<Allocation>);
Table<Event> fields_of(std::type_identity<Event>);

// Rules a nested object of API input must meet before its unknown fields are checked.
template <class T>
void check_input(Reader&, T&) {}
void check_input(Reader& r, VolumeCapability& cap);
void check_input(Reader& r, Task& task);
void check_input(Reader& r, TaskCSIPlugin& plugin);

// ---- enums: how each is parsed and named in errors ----
template <class E>
struct EnumText {
  std::optional<E> (*parse)(std::string_view);
  const char* what;
};
inline EnumText<AccessMode> enum_text(AccessMode) { return {parse_access_mode, "access mode"}; }
inline EnumText<AttachmentMode> enum_text(AttachmentMode) { return {parse_attachment_mode, "attachment mode"}; }
inline EnumText<ClaimMode> enum_text(ClaimMode) { return {parse_claim_mode, "claim mode"}; }
inline EnumText<ClaimState> enum_text(ClaimState) { return {parse_claim_state, "claim state"}; }
inline EnumText<ControllerPublish> enum_text(ControllerPublish) {
  return {parse_controller_publish, "controller publish"};
}
inline EnumText<DesiredStatus> enum_text(DesiredStatus) { return {parse_desired_status, "desired status"}; }
inline EnumText<ClientStatus> enum_text(ClientStatus) { return {parse_client_status, "client status"}; }
inline EnumText<PluginType> enum_text(PluginType) { return {parse_plugin_type, "plugin type"}; }
inline EnumText<NodeStatus> enum_text(NodeStatus) { return {parse_node_status, "node status"}; }
inline EnumText<GroupChangePolicy> enum_text(GroupChangePolicy) {
  return {parse_group_change_policy, "group change policy (OnRootMismatch, Always or None)"};
}

// ---- whole objects ----
template <class T>
json write_object(const T& obj, View view) {
  json out = json::object();
  for (const auto& f : fields_of(std::type_identity<T>{})) {
    if ((f.where & bit(view)) == 0) continue;
    if (auto value = f.write(f, obj, view)) out[std::string(f.key)] = std::move(*value);
  }
  return out;
}

// The fields this reader takes, in table order; the caller checks rules and unknown fields.
template <class T>
void read_fields(Reader& r, T& obj) {
  for (const auto& f : fields_of(std::type_identity<T>{})) {
    if ((f.where & read_bit(r)) != 0 && f.read != nullptr) f.read(f, r, obj);
  }
}

template <class T>
void read_object(Reader& r, T& obj) {
  read_fields(r, obj);
  if (r.strict()) check_input(r, obj);
}

// A stored object: types are checked, unknown fields ignored (a newer writer's rows still load).
template <class T>
Expected<T> from_storage(const json& j, std::string object, std::string T::*id = nullptr) {
  Ctx ctx{std::move(object), {}};
  T value;
  Reader r(j, ctx, "", false);
  read_fields(r, value);
  if (id != nullptr && r.ok() && (value.*id).empty()) r.fail("ID", "required");
  return finish(ctx, std::move(value));
}

// ---- values, by C++ type ----
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsMap : std::false_type {};
template <class T>
struct IsMap<std::map<std::string, T>> : std::true_type {};
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

json string_map_json(const StringMap& m, bool redact);
std::optional<json> secret_map_json(const StringMap& m, View view);
json string_list_json(const std::vector<std::string>& list, bool redact);

template <class M>
std::optional<json> write_value(const M& v, const Opts& o, View view) {
  const bool redact = o.redact && view == View::api;
  if constexpr (std::is_same_v<M, StringMap>) {
    if (o.secret) return secret_map_json(v, view);
    return string_map_json(v, redact);
  } else if constexpr (std::is_same_v<M, std::vector<std::string>>) {
    return string_list_json(v, redact);
  } else if constexpr (std::is_same_v<M, Duration>) {
    if (o.null_when_empty && v.count() <= 0) return json(nullptr);
    return format_duration(v);
  } else if constexpr (std::is_same_v<M, Time>) {
    if (!is_set(v)) return std::nullopt;
    return format_time(v);
  } else if constexpr (std::is_enum_v<M>) {
    if (o.omit_when_unset && v == M{}) return std::nullopt;
    return std::string(to_string(v));
  } else if constexpr (std::is_arithmetic_v<M> || std::is_same_v<M, std::string>) {
    return json(v);
  } else if constexpr (IsVector<M>::value) {
    json out = json::array();
    for (const auto& item : v) out.push_back(write_object(item, nested(view)));
    return out;
  } else if constexpr (IsMap<M>::value) {
    json out = json::object();
    for (const auto& [name, item] : v) out[name] = write_object(item, nested(view));
    return out;
  } else if constexpr (IsOptional<M>::value) {
    return v ? write_object(*v, nested(view)) : json(nullptr);
  } else {
    if constexpr (requires { v.empty(); }) {
      if (o.null_when_empty && v.empty()) return json(nullptr);
    }
    return write_object(v, nested(view));
  }
}

// ---- text without a DOM ----
// write_text(obj, view) is write_object(obj, view).dump(), byte for byte (compact, keys in
// nlohmann's order, its escaping), written straight into one string: the control plane renders
// every changed record at each commit on its io thread, and an allocation carries up to 50
// events, so the DOM's maps and their nodes were most of that thread's malloc and free (issue 21).

// A JSON string as nlohmann dumps it (invalid UTF-8 throws as its dump() does).
void append_json_string(std::string& out, std::string_view s);
void append_json_dump(std::string& out, const json& j);
// string_map_json / secret_map_json (masked: every value [REDACTED]) / string_list_json as text.
void append_string_map(std::string& out, const StringMap& m, bool redact, bool masked);
void append_string_list(std::string& out, const std::vector<std::string>& list, bool redact);
void append_time_text(std::string& out, Time t);

template <class T>
void write_object_text(const T& obj, View view, std::string& out);

template <class M>
bool write_value_text(const M& v, const Opts& o, View view, std::string& out) {
  const bool redact = o.redact && view == View::api;
  if constexpr (std::is_same_v<M, StringMap>) {
    if (o.secret && v.empty()) return false;
    append_string_map(out, v, redact, o.secret && view != View::storage);
  } else if constexpr (std::is_same_v<M, std::vector<std::string>>) {
    append_string_list(out, v, redact);
  } else if constexpr (std::is_same_v<M, Duration>) {
    if (o.null_when_empty && v.count() <= 0)
      out += "null";
    else
      append_json_string(out, format_duration(v));
  } else if constexpr (std::is_same_v<M, Time>) {
    if (!is_set(v)) return false;
    append_time_text(out, v);
  } else if constexpr (std::is_enum_v<M>) {
    if (o.omit_when_unset && v == M{}) return false;
    append_json_string(out, to_string(v));
  } else if constexpr (std::is_same_v<M, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_integral_v<M>) {
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  } else if constexpr (std::is_arithmetic_v<M>) {
    append_json_dump(out, json(v));  // nlohmann's shortest round trip spelling
  } else if constexpr (std::is_same_v<M, std::string>) {
    append_json_string(out, v);
  } else if constexpr (IsVector<M>::value) {
    out += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ',';
      write_object_text(v[i], nested(view), out);
    }
    out += ']';
  } else if constexpr (IsMap<M>::value) {
    out += '{';
    for (bool first = true; const auto& [name, item] : v) {
      if (!std::exchange(first, false)) out += ',';
      append_json_string(out, name);
      out += ':';
      write_object_text(item, nested(view), out);
    }
    out += '}';
  } else if constexpr (IsOptional<M>::value) {
    if (v)
      write_object_text(*v, nested(view), out);
    else
      out += "null";
  } else {
    if constexpr (requires { v.empty(); }) {
      if (o.null_when_empty && v.empty()) {
        out += "null";
        return true;
      }
    }
    write_object_text(v, nested(view), out);
  }
  return true;
}

// A type's fields in the order nlohmann's object (a std::map) dumps its keys.
template <class T>
const std::vector<const Field<T>*>& fields_by_key() {
  static const std::vector<const Field<T>*> sorted = [] {
    std::vector<const Field<T>*> out;
    for (const auto& f : fields_of(std::type_identity<T>{})) out.push_back(&f);
    std::stable_sort(out.begin(), out.end(), [](const Field<T>* a, const Field<T>* b) { return a->key < b->key; });
    return out;
  }();
  return sorted;
}

template <class T>
void write_object_text(const T& obj, View view, std::string& out) {
  out += '{';
  bool first = true;
  for (const Field<T>* f : fields_by_key<T>()) {
    if ((f->where & bit(view)) == 0) continue;
    const auto mark = out.size();
    if (!first) out += ',';
    append_json_string(out, f->key);
    out += ':';
    if (f->write_text(*f, obj, view, out))
      first = false;
    else
      out.resize(mark);
  }
  out += '}';
}

template <class T>
std::string write_text(const T& obj, View view) {
  std::string out;
  out.reserve(1024);
  write_object_text(obj, view, out);
  return out;
}

template <class M>
void read_value(Reader& r, std::string_view key, M& out, const Opts& o) {
  if constexpr (std::is_same_v<M, std::string>) {
    r.str(key, out);
  } else if constexpr (std::is_same_v<M, bool>) {
    r.boolean(key, out);
  } else if constexpr (std::is_same_v<M, std::int64_t>) {
    r.i64(key, out, (o.non_negative & read_bit(r)) != 0);
  } else if constexpr (std::is_same_v<M, int>) {
    r.i32(key, out);
  } else if constexpr (std::is_same_v<M, std::uint64_t>) {
    r.u64(key, out);
  } else if constexpr (std::is_same_v<M, StringMap>) {
    r.string_map(key, out);
  } else if constexpr (std::is_same_v<M, std::vector<std::string>>) {
    r.string_list(key, out);
  } else if constexpr (std::is_same_v<M, Duration>) {
    r.duration(key, out);
  } else if constexpr (std::is_same_v<M, Time>) {
    r.time(key, out);
  } else if constexpr (std::is_enum_v<M>) {
    const auto text = enum_text(M{});
    r.enumeration(key, out, text.parse, text.what);
  } else if constexpr (IsVector<M>::value) {
    M list;
    r.object_array(key, [&](Reader& c) { read_object(c, list.emplace_back()); });
    if (r.ok()) out = std::move(list);
  } else if constexpr (IsMap<M>::value) {
    r.object_map(key, [&](Reader& c, const std::string& name) { read_object(c, out[name]); });
  } else if constexpr (IsOptional<M>::value) {
    r.object(key, [&](Reader& c) { read_object(c, out.emplace()); });
  } else {
    r.object(key, [&](Reader& c) { read_object(c, out); });
  }
}

// ---- rows ----
template <class M>
struct MemberOf;
template <class T, class V>
struct MemberOf<V T::*> {
  using Owner = T;
  using Value = V;
};

// A member read and written by its type's codec.
template <auto Member, class T = typename MemberOf<decltype(Member)>::Owner>
constexpr Field<T> field(std::string_view key, unsigned where, Opts opts = {}) {
  return {key,
          where,
          opts,
          [](const Field<T>& f, const T& obj, View view) { return write_value(obj.*Member, f.opts, view); },
          [](const Field<T>& f, Reader& r, T& obj) { read_value(r, f.key, obj.*Member, f.opts); },
          [](const Field<T>& f, const T& obj, View view, std::string& out) {
            return write_value_text(obj.*Member, f.opts, view, out);
          }};
}

// A custom or derived value without a text writer of its own: its DOM, dumped.
inline bool dump_written(const std::optional<json>& value, std::string& out) {
  if (value) append_json_dump(out, *value);
  return value.has_value();
}

// A member with its own shape: Write(value, view) and Read(reader, key, value); WriteText(value,
// view, out) writes Write's text (its DOM dumped when there is none).
template <auto Member, auto Write, auto Read, auto WriteText = nullptr,
          class T = typename MemberOf<decltype(Member)>::Owner>
constexpr Field<T> custom(std::string_view key, unsigned where) {
  return {key,
          where,
          {},
          [](const Field<T>&, const T& obj, View view) -> std::optional<json> { return Write(obj.*Member, view); },
          [](const Field<T>& f, Reader& r, T& obj) { Read(r, f.key, obj.*Member); },
          [](const Field<T>&, const T& obj, View view, std::string& out) {
            if constexpr (std::is_same_v<decltype(WriteText), std::nullptr_t>) {
              return dump_written(Write(obj.*Member, view), out);
            } else {
              WriteText(obj.*Member, view, out);
              return true;
            }
          }};
}

// Output only, derived from the whole object.
template <class T, json (*Derive)(const T&)>
constexpr Field<T> derived(std::string_view key, unsigned where) {
  return {
      key,     where,
      {},      [](const Field<T>&, const T& obj, View) -> std::optional<json> { return Derive(obj); },
      nullptr, [](const Field<T>&, const T& obj, View, std::string& out) { return dump_written(Derive(obj), out); }};
}

}  // namespace mooring::domain::codec
