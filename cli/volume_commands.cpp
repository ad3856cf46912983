// `mooring volume ...`: register, status, detach, create, delete, deregister, expand, modify.
#include <algorithm>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "cli/json_file.hpp"
#include "cli/lookup.hpp"
#include "cli/table.hpp"
#include "shared/domain/units.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

std::string volume_path(const std::string& id) { return "/v1/volume/csi/" + url_encode(id); }

// A register/create file holds {"Volumes":[...]} (the API's shape) or one bare volume object.
domain::Expected<json> volumes_from_file(const std::string& path) {
  auto doc = read_json_file(path);
  if (!doc) return domain::error(doc.error());
  if (!doc->is_object()) return domain::error(path + ": expected a JSON object ({\"Volumes\":[...]} or one volume)");
  if (doc->contains("Volumes")) {
    const auto& vols = (*doc)["Volumes"];
    if (!vols.is_array() || vols.empty()) return domain::error(path + ": \"Volumes\" must be a non-empty array");
    for (std::size_t i = 0; i < vols.size(); ++i)
      if (!vols[i].is_object() || field(vols[i], "ID").empty())
        return domain::error(path + ": Volumes[" + std::to_string(i) + "] needs an \"ID\"");
    return vols;
  }
  if (field(*doc, "ID").empty()) return domain::error(path + ": the volume needs an \"ID\"");
  return json::array({*doc});
}

std::string healthy_of(const json& obj, const char* healthy, const char* expected) {
  return field(obj, healthy) + "/" + field(obj, expected);
}

std::string capabilities_text(const json& caps) {
  if (!caps.is_array() || caps.empty()) return "<none>";
  std::string out;
  for (const auto& c : caps) out += ", " + field(c, "AccessMode") + "/" + field(c, "AttachmentMode");
  return out.substr(2);
}

std::string capacity_text(std::int64_t bytes) { return bytes > 0 ? human_bytes(bytes) : "<unknown>"; }

// A claim's Usage as "1.0 MiB / 1.0 GiB used, 12 / 65536 inodes"; "-" until its node reports it.
std::string usage_text(const json& u) {
  if (!u.is_object()) return "-";
  std::string out =
      human_bytes(field_int(u, "BytesUsed")) + " / " + capacity_text(field_int(u, "BytesTotal")) + " used";
  if (field_int(u, "InodesTotal") > 0)
    out += ", " + std::to_string(field_int(u, "InodesUsed")) + " / " + std::to_string(field_int(u, "InodesTotal")) +
           " inodes";
  return out;
}

// "normal", or "ABNORMAL: <plugin's message>"; "-" when the plugin reports no condition.
std::string condition_text(const json& c) {
  if (!c.is_object()) return "-";
  if (!c.value("Abnormal", false)) return "normal";
  return "ABNORMAL" + (field(c, "Message").empty() ? std::string{} : ": " + field(c, "Message"));
}

void print_volume(Context& ctx, const json& v) {
  KeyValues kv;
  kv.add("ID", field(v, "ID"));
  kv.add("Name", field(v, "Name"));
  kv.add("Namespace", field(v, "Namespace"));
  kv.add("External ID", field(v, "ExternalID"));
  kv.add("Plugin ID", field(v, "PluginID"));
  kv.add("Provider", field(v, "Provider"));
  kv.add("Version", field(v, "ProviderVersion"));
  kv.add("Capacity", capacity_text(field_int(v, "Capacity")));
  std::int64_t min = field_int(v, "RequestedCapacityMin"), max = field_int(v, "RequestedCapacityMax");
  if (min > 0 || max > 0)
    kv.add("Requested Capacity", (min > 0 ? human_bytes(min) : "-") + " .. " + (max > 0 ? human_bytes(max) : "-"));
  kv.add("Schedulable", field(v, "Schedulable"));
  if (v.value("Deleting", false)) kv.add("Deleting", "true (DeleteVolume sent; no new claims)");
  kv.add("Controllers Healthy", healthy_of(v, "ControllersHealthy", "ControllersExpected"));
  kv.add("Nodes Healthy", healthy_of(v, "NodesHealthy", "NodesExpected"));
  kv.add("Access Mode", field(v, "AccessMode").empty() ? "<none>" : field(v, "AccessMode"));
  kv.add("Attachment Mode", field(v, "AttachmentMode").empty() ? "<none>" : field(v, "AttachmentMode"));
  kv.add("Capabilities", capabilities_text(v.value("RequestedCapabilities", json())));
  const json mo = v.value("MountOptions", json());
  std::string mount = field(mo, "FSType");
  if (mo.is_object() && mo.contains("MountFlags") && mo["MountFlags"].is_array() && !mo["MountFlags"].empty())
    mount += std::string(mount.empty() ? "" : " ") + "flags " + text(mo["MountFlags"]);
  kv.add("Mount Options", mount.empty() ? "<none>" : mount);
  kv.add("Topologies", topologies_text(v.value("Topologies", json())));
  if (const json mp = v.value("MutableParameters", json()); mp.is_object() && !mp.empty())
    kv.add("Mutable Parameters", map_text(mp));
  if (const json lm = v.value("LastModify", json()); lm.is_object()) {
    std::string last = field(lm, "State") + " (" + map_text(lm.value("Parameters", json())) + ")";
    if (!field(lm, "Error").empty()) last += ": " + field(lm, "Error");
    kv.add("Last Modify", last);
  }
  ctx.out() << kv.render();

  ctx.out() << "\nClaims\n";
  const json claims = v.value("Claims", json());
  if (!claims.is_array() && !claims.is_object()) {
    ctx.out() << "No claims\n";
    return;
  }
  Table t({"Allocation ID", "Node ID", "Mode", "State", "Last Error", "Next Attempt"});
  Table health({"Allocation ID", "Node ID", "Usage", "Condition"});
  auto now = std::chrono::system_clock::now();
  for (const auto& c : claims) {
    t.add_row({field(c, "AllocationID"), field(c, "NodeID"), field(c, "Mode"), field(c, "State"), field(c, "LastError"),
               time_text(field(c, "NextAttempt"), now)});
    const json usage = c.value("Usage", json()), condition = c.value("Condition", json());
    if (usage.is_object() || condition.is_object())
      health.add_row({field(c, "AllocationID"), field(c, "NodeID"), usage_text(usage), condition_text(condition)});
  }
  ctx.out() << (t.empty() ? std::string("No claims\n") : t.render());
  // What the claims' nodes last reported (NodeGetVolumeStats), when their plugin reports it.
  if (!health.empty()) ctx.out() << "\nVolume Health\n" << health.render();
}

// The volume list as `volume status` shows it; with a Namespace column when the list spans them.
std::string volume_table(const json& volumes, bool spans) {
  std::vector<std::string> headers{"ID", "Name", "Plugin ID", "Schedulable", "Access Mode", "Readers", "Writers"};
  if (spans) headers.insert(headers.begin() + 2, "Namespace");
  Table t(headers);
  for (const auto& v : volumes) {
    std::vector<std::string> row{field(v, "ID"),
                                 field(v, "Name"),
                                 field(v, "PluginID"),
                                 field(v, "Schedulable"),
                                 field(v, "AccessMode").empty() ? "<none>" : field(v, "AccessMode"),
                                 field(v, "CurrentReaders"),
                                 field(v, "CurrentWriters")};
    if (spans) row.insert(row.begin() + 2, field(v, "Namespace"));
    t.add_row(std::move(row));
  }
  return t.render();
}

int volume_status(Context& ctx, const Invocation& inv) {
  if (!inv.args.empty()) {
    const ObjectKind kind{
        "volume", "volumes", "/v1/volume/csi/", "/v1/volumes", "mooring volume status", [&](const json& items) {
          return volume_table(items, ctx.every_namespace());
        }};
    // -refresh-stats: the claims' nodes poll NodeGetVolumeStats now (GET ...?stats=refresh).
    auto r = get_by_id_or_prefix(ctx, kind, inv.args[0], inv.enabled("refresh-stats") ? "?stats=refresh" : "");
    if (!r) return kExitError;
    if (ctx.json()) return ctx.print_json(r->body), kExitOk;
    print_volume(ctx, r->body);
    return kExitOk;
  }
  std::string target = "/v1/volumes";
  if (auto p = inv.flag("plugin")) target += "?plugin_id=" + url_encode(*p);
  auto r = ctx.call("GET", target);
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  if (!r->body.is_array() || r->body.empty()) {
    ctx.out() << "No CSI volumes\n";
    return kExitOk;
  }
  ctx.out() << volume_table(r->body, ctx.every_namespace());
  return kExitOk;
}

int volume_register(Context& ctx, const Invocation& inv) {
  auto vols = volumes_from_file(inv.args[0]);
  if (!vols) return ctx.fail(vols.error());
  // One volume goes to its own path (PUT /v1/volume/csi/:id), several to PUT /v1/volumes in one transaction.
  std::string target = vols->size() == 1 ? volume_path(field((*vols)[0], "ID")) : "/v1/volumes";
  auto r = ctx.call("PUT", target, json{{"Volumes", *vols}});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  for (const auto& v : *vols) ctx.out() << "Volume \"" << field(v, "ID") << "\" registered\n";
  return kExitOk;
}

int volume_create(Context& ctx, const Invocation& inv) {
  auto vols = volumes_from_file(inv.args[0]);
  if (!vols) return ctx.fail(vols.error());
  if (vols->size() != 1)
    return ctx.fail(inv.args[0] + ": create takes exactly one volume, found " + std::to_string(vols->size()));
  const std::string id = field((*vols)[0], "ID");
  auto result = ctx.attempt("PUT", volume_path(id) + "/create", json{{"Volumes", *vols}},
                            {.send_secrets = true, .timeout = std::chrono::minutes(5)});
  if (auto* failure = std::get_if<CallFailure>(&result)) {
    // The API's 409 names its own route; a CLI user wants the commands for a volume that exists.
    if (failure->status == 409 && std::holds_alternative<ApiReply>(ctx.attempt("GET", volume_path(id))))
      return ctx.fail("volume \"" + id + "\" already exists (HTTP 409 from PUT " + volume_path(id) +
                      "/create): `mooring volume status " + id + "` shows it; `mooring volume expand " + id +
                      " SIZE` grows it; `mooring volume delete " + id + "` deletes it, to create it anew");
    return ctx.fail(failure->message);
  }
  auto* r = &std::get<ApiReply>(result);
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  json created =
      r->body.is_object() && r->body.contains("Volumes") && r->body["Volumes"].is_array() && !r->body["Volumes"].empty()
          ? r->body["Volumes"][0]
          : json();
  std::string ext = field(created, "ExternalID");
  ctx.out() << "Created external volume " << (ext.empty() ? "(id not reported)" : ext) << " with ID " << id;
  if (auto cap = field_int(created, "Capacity"); cap > 0) ctx.out() << " (" << human_bytes(cap) << ")";
  ctx.out() << "\n";
  return kExitOk;
}

int volume_delete(Context& ctx, const Invocation& inv) {
  const std::string& id = inv.args[0];
  auto r = ctx.call("DELETE", volume_path(id) + "/delete", std::nullopt,
                    {.send_secrets = true, .timeout = std::chrono::minutes(5)});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Successfully deleted volume \"" << id << "\"\n";
  return kExitOk;
}

int volume_deregister(Context& ctx, const Invocation& inv) {
  const std::string& id = inv.args[0];
  const bool force = inv.enabled("force"), purge = inv.enabled("purge");
  if (force && purge) {
    ctx.fail("-force and -purge exclude each other");
    return kExitUsage;
  }
  auto r = ctx.call("DELETE", volume_path(id) + (force ? "?force=true" : purge ? "?purge=true" : ""));
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  if (r->body.is_object() && r->body.value("Deregistering", false)) {
    ctx.out() << "Volume \"" << id << "\" is deregistered once its claims are released "
              << "(`mooring volume status " << id << "` shows them)\n";
    return kExitOk;
  }
  ctx.out() << "Successfully deregistered volume \"" << id << "\"\n";
  return kExitOk;
}

int volume_detach(Context& ctx, const Invocation& inv) {
  const std::string &id = inv.args[0], &node = inv.args[1];
  auto r = ctx.call("DELETE", volume_path(id) + "/detach?node=" + url_encode(node), std::nullopt,
                    {.timeout = std::chrono::minutes(5)});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Detach of volume \"" << id << "\" from node \"" << node << "\" requested; `mooring volume status " << id
            << "` shows the claims' progress\n";
  return kExitOk;
}

// Expansion is a re-registration with a higher RequestedCapacityMin: the control plane sees the
// minimum above the known capacity and has the controller expand the volume. Only the fields the
// register body requires are sent; everything left out keeps its stored value (secrets included).
int volume_expand(Context& ctx, const Invocation& inv) {
  const std::string& id = inv.args[0];
  auto size = domain::parse_size(inv.args[1]);
  if (!size || *size <= 0)
    return ctx.fail("NEW_MIN \"" + inv.args[1] + "\" is not a size (like 10GiB, 500Mi, 2G or a number of bytes)");
  auto cur = ctx.call("GET", volume_path(id));
  if (!cur) return kExitError;
  const json& v = cur->body;
  std::int64_t capacity = field_int(v, "Capacity"), min = field_int(v, "RequestedCapacityMin"),
               max = field_int(v, "RequestedCapacityMax");
  if (*size <= std::max(capacity, min))
    return ctx.fail("volume \"" + id + "\" already has " + human_bytes(std::max(capacity, min)) +
                    "; volumes only grow, so NEW_MIN must be larger");
  if (max > 0 && *size > max)
    return ctx.fail("NEW_MIN " + human_bytes(*size) + " is above the volume's RequestedCapacityMax (" +
                    human_bytes(max) + "); raise the maximum with `mooring volume register` first");
  json update = {{"ID", id},
                 {"PluginID", field(v, "PluginID")},
                 {"ExternalID", field(v, "ExternalID")},
                 {"RequestedCapabilities", v.value("RequestedCapabilities", json::array())},
                 {"RequestedCapacityMin", *size},
                 {"RequestedCapacityMax", max}};
  auto r =
      ctx.call("PUT", volume_path(id), json{{"Volumes", json::array({update})}}, {.timeout = std::chrono::minutes(5)});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  json after =
      r->body.is_object() && r->body.contains("Volumes") && r->body["Volumes"].is_array() && !r->body["Volumes"].empty()
          ? r->body["Volumes"][0]
          : json();
  std::int64_t now_cap = field_int(after, "Capacity");
  ctx.out() << "Volume \"" << id << "\": requested minimum capacity is now " << human_bytes(*size);
  if (now_cap >= *size)
    ctx.out() << "; capacity " << human_bytes(now_cap) << "\n";
  else
    ctx.out() << "; capacity " << capacity_text(now_cap) << " until the controller has expanded it\n";
  return kExitOk;
}

// KEY=VALUE words into the modify body; a word without "=" or with an empty key is refused here.
int volume_modify(Context& ctx, const Invocation& inv) {
  const std::string& id = inv.args[0];
  json params = json::object();
  for (std::size_t i = 1; i < inv.args.size(); ++i) {
    const auto& word = inv.args[i];
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0) return ctx.fail("\"" + word + "\" is not KEY=VALUE");
    params[word.substr(0, eq)] = word.substr(eq + 1);
  }
  auto r = ctx.call("PUT", volume_path(id) + "/modify", json{{"MutableParameters", params}},
                    {.send_secrets = true, .timeout = std::chrono::minutes(5)});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Volume \"" << id << "\": modified " << map_text(params) << "\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> volume_commands() {
  std::vector<CommandSpec> commands{
      {.words = {"volume", "status"},
       .arguments = "[ID]",
       .min_args = 0,
       .max_args = 1,
       .flags = {{"plugin", true, "ID", "list only the volumes of this plugin"},
                 {"refresh-stats", false, "",
                  "with an ID: the claims' nodes poll the volume's usage and condition now"}},
       .summary = "List volumes, or show one volume with its claims",
       .help = "ID may be a unique prefix of the ID; one that matches several volumes lists them.\n"
               "With an ID: the volume's details and every claim with its release state, last error and\n"
               "next attempt, so a stuck release explains itself; then each claim's usage and condition\n"
               "(NodeGetVolumeStats) as its node last reported them.",
       .run = volume_status},
      {.words = {"volume", "register"},
       .arguments = "FILE",
       .min_args = 1,
       .max_args = 1,
       .summary = "Register existing volumes from a JSON file",
       .help = "FILE holds the API's register body {\"Volumes\":[{...}]} or one volume object; \"-\" reads\n"
               "standard input. Registering an existing ID updates it. See examples/volume.json, or\n"
               "`mooring volume init -register`, which writes a commented example.",
       .run = volume_register},
      {.words = {"volume", "create"},
       .arguments = "FILE",
       .min_args = 1,
       .max_args = 1,
       .summary = "Create a volume through its controller plugin and register it",
       .help = "FILE is like for register but without ExternalID (the plugin returns it).\n"
               "See examples/volume-create.json, or `mooring volume init`, which writes a commented example.\n"
               "-secrets are passed to the plugin.",
       .run = volume_create},
      {.words = {"volume", "delete"},
       .arguments = "ID",
       .min_args = 1,
       .max_args = 1,
       .summary = "Delete a volume through its controller plugin and deregister it",
       .run = volume_delete},
      {.words = {"volume", "deregister"},
       .arguments = "ID",
       .min_args = 1,
       .max_args = 1,
       .flags = {{"force", false, "", "also drop claims of terminal allocations whose release is done"},
                 {"purge", false, "", "release the claims of terminal allocations first, then deregister"}},
       .summary = "Forget a volume without deleting it in the storage",
       .run = volume_deregister},
      {.words = {"volume", "detach"},
       .arguments = "ID NODE",
       .min_args = 2,
       .max_args = 2,
       .summary = "Release a volume's claims on a node (node unpublish, then controller unpublish)",
       .run = volume_detach},
      {.words = {"volume", "expand"},
       .arguments = "ID NEW_MIN",
       .min_args = 2,
       .max_args = 2,
       .summary = "Grow a volume: re-register it with a larger requested minimum capacity",
       .help = "NEW_MIN is a size: bytes, or with a unit K/M/G/T (powers of 1000) or Ki/Mi/Gi/Ti (1024);\n"
               "a trailing B is allowed (10GiB).",
       .run = volume_expand},
      {.words = {"volume", "modify"},
       .arguments = "ID KEY=VALUE...",
       .min_args = 2,
       .max_args = 64,
       .summary = "Change a volume's mutable parameters in place (CSI ControllerModifyVolume)",
       .help = "Each KEY must be one of the volume's MutableParameters (declared at create or register).\n"
               "-secrets are passed to the plugin after the volume's own. `mooring volume status ID` shows\n"
               "the result as Last Modify; an uncertain one is settled by running the same command again.",
       .run = volume_modify},
  };
  commands.insert(commands.begin() + 3, volume_init_command());  // after create, the file it takes
  return commands;
}

}  // namespace mooring::cli
