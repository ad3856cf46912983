// `mooring volume snapshot ...`: create, list, delete (Nomad's /v1/volumes/snapshot shapes), and
// `mooring volume group-snapshot ...`: several volumes snapshotted together (/v1/volumes/group-snapshot).
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "cli/table.hpp"

namespace mooring::cli {

namespace {

using nlohmann::json;

// The API answers {"Snapshots":[...]}; a bare array is accepted too.
json snapshots_of(const json& body) {
  if (body.is_array()) return body;
  if (body.is_object() && body.contains("Snapshots") && body["Snapshots"].is_array()) return body["Snapshots"];
  return json::array();
}

std::string snapshot_table(const json& snapshots) {
  Table t({"Snapshot ID", "Plugin ID", "Volume ID", "Size", "Create Time", "Ready"});
  for (const auto& s : snapshots) {
    std::string vol = field(s, "SourceVolumeID");
    if (vol.empty()) vol = field(s, "ExternalSourceVolumeID");
    std::int64_t size = field_int(s, "SizeBytes");
    std::string created = field(s, "CreateTime");
    // Nomad sends CreateTime as Unix seconds; an RFC 3339 string is shown as-is.
    if (s.is_object() && s.contains("CreateTime") && s["CreateTime"].is_number()) {
      std::time_t secs = static_cast<std::time_t>(field_int(s, "CreateTime"));
      char buf[32];
      std::tm tm{};
      gmtime_r(&secs, &tm);
      std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
      created = buf;
    }
    t.add_row(
        {field(s, "ID"), field(s, "PluginID"), vol, size > 0 ? human_bytes(size) : "", created, field(s, "IsReady")});
  }
  return t.render();
}

int snapshot_create(Context& ctx, const Invocation& inv) {
  const std::string &volume = inv.args[0], &name = inv.args[1];
  // The plugin comes from the volume, so a wrong volume id fails with "volume not found" up front.
  auto vol = ctx.call("GET", "/v1/volume/csi/" + url_encode(volume));
  if (!vol) return kExitError;
  json snap = {{"SourceVolumeID", volume}, {"Name", name}, {"PluginID", field(vol->body, "PluginID")}};
  auto r = ctx.call("PUT", "/v1/volumes/snapshot", json{{"Snapshots", json::array({snap})}},
                    {.send_secrets = true, .timeout = std::chrono::minutes(5)});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  json snaps = snapshots_of(r->body);
  if (snaps.empty()) {
    ctx.out() << "Snapshot \"" << name << "\" of volume \"" << volume << "\" requested\n";
    return kExitOk;
  }
  ctx.out() << "Created snapshot \"" << name << "\" of volume \"" << volume << "\"\n\n" << snapshot_table(snaps);
  return kExitOk;
}

// Asks each plugin (the -plugin flag's, else every registered plugin) for `path?plugin_id=ID` and
// collects the items under `key` into `all`. A plugin that cannot answer is a warning unless it
// was named; an exit code other than kExitOk means the command failed (and said why).
int collect_per_plugin(Context& ctx, const Invocation& inv, const std::string& path, const std::string& key,
                       const std::string& what, json& all) {
  std::vector<std::string> plugins;
  if (auto p = inv.flag("plugin")) {
    plugins.push_back(*p);
  } else {
    auto list = ctx.call("GET", "/v1/plugins");
    if (!list) return kExitError;
    if (list->body.is_array())
      for (const auto& p : list->body) plugins.push_back(field(p, "ID"));
  }
  all = json::array();
  std::size_t failed = 0;
  for (const auto& p : plugins) {
    std::string error;
    auto r = ctx.call("GET", path + "?plugin_id=" + url_encode(p), std::nullopt,
                      {.send_secrets = true, .quiet = !inv.has("plugin")}, &error);
    if (!r) {
      if (inv.has("plugin")) return kExitError;
      ctx.err() << "Warning: plugin \"" << p << "\": " << error << "\n";
      ++failed;
      continue;
    }
    json items = r->body.is_array() ? r->body : r->body.is_object() ? r->body.value(key, json::array()) : json::array();
    for (auto item : items) {
      if (item.is_object() && !item.contains("PluginID")) item["PluginID"] = p;
      all.push_back(std::move(item));
    }
  }
  if (!plugins.empty() && failed == plugins.size()) return ctx.fail("no plugin could list its " + what);
  return kExitOk;
}

int snapshot_list(Context& ctx, const Invocation& inv) {
  json all;
  if (int code = collect_per_plugin(ctx, inv, "/v1/volumes/snapshot", "Snapshots", "snapshots", all); code != kExitOk)
    return code;
  if (ctx.json()) return ctx.print_json(json{{"Snapshots", all}}), kExitOk;
  if (all.empty()) {
    ctx.out() << "No snapshots\n";
    return kExitOk;
  }
  ctx.out() << snapshot_table(all);
  return kExitOk;
}

int snapshot_delete(Context& ctx, const Invocation& inv) {
  const std::string &plugin = inv.args[0], &snapshot = inv.args[1];
  auto r = ctx.call("DELETE",
                    "/v1/volumes/snapshot?plugin_id=" + url_encode(plugin) + "&snapshot_id=" + url_encode(snapshot),
                    std::nullopt, {.send_secrets = true, .timeout = std::chrono::minutes(5)});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Deleted snapshot \"" << snapshot << "\" of plugin \"" << plugin << "\"\n";
  return kExitOk;
}

std::string group_table(const json& groups) {
  Table t({"Group Snapshot ID", "Plugin ID", "Members", "Ready"});
  for (const auto& g : groups) {
    const auto n = g.is_object() && g.contains("Snapshots") && g["Snapshots"].is_array() ? g["Snapshots"].size() : 0;
    t.add_row({field(g, "ID"), field(g, "PluginID"), std::to_string(n), field(g, "IsReady")});
  }
  return t.render();
}

int group_create(Context& ctx, const Invocation& inv) {
  const std::string& name = inv.args[0];
  std::vector<std::string> volumes(inv.args.begin() + 1, inv.args.end());
  json group = {{"Name", name}, {"SourceVolumeIDs", volumes}};
  if (auto p = inv.flag("plugin")) group["PluginID"] = *p;  // else the volumes' plugin
  auto r = ctx.call("PUT", "/v1/volumes/group-snapshot", json{{"GroupSnapshot", group}},
                    {.send_secrets = true, .timeout = std::chrono::minutes(5)});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  const json made = r->body.is_object() ? r->body.value("GroupSnapshot", json::object()) : json::object();
  ctx.out() << "Created group snapshot \"" << name << "\" (" << field(made, "ID") << ") of " << volumes.size()
            << " volumes\n\n"
            << snapshot_table(snapshots_of(made));
  return kExitOk;
}

int group_list(Context& ctx, const Invocation& inv) {
  json all;
  if (int code = collect_per_plugin(ctx, inv, "/v1/volumes/group-snapshot", "GroupSnapshots", "group snapshots", all);
      code != kExitOk)
    return code;
  if (ctx.json()) return ctx.print_json(json{{"GroupSnapshots", all}}), kExitOk;
  if (all.empty()) {
    ctx.out() << "No group snapshots\n";
    return kExitOk;
  }
  ctx.out() << group_table(all);
  for (const auto& g : all)
    ctx.out() << "\nGroup snapshot " << field(g, "ID") << "\n" << snapshot_table(snapshots_of(g));
  return kExitOk;
}

int group_delete(Context& ctx, const Invocation& inv) {
  const std::string &plugin = inv.args[0], &group = inv.args[1];
  auto r =
      ctx.call("DELETE",
               "/v1/volumes/group-snapshot?plugin_id=" + url_encode(plugin) + "&group_snapshot_id=" + url_encode(group),
               std::nullopt, {.send_secrets = true, .timeout = std::chrono::minutes(5)});
  if (!r) return kExitError;
  if (ctx.json()) return ctx.print_json(r->body), kExitOk;
  ctx.out() << "Deleted group snapshot \"" << group << "\" of plugin \"" << plugin << "\" with its snapshots\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> snapshot_commands() {
  return {
      {.words = {"volume", "snapshot", "create"},
       .arguments = "VOLUME NAME",
       .min_args = 2,
       .max_args = 2,
       .summary = "Snapshot a volume through its controller plugin",
       .run = snapshot_create},
      {.words = {"volume", "snapshot", "list"},
       .arguments = "",
       .min_args = 0,
       .max_args = 0,
       .flags = {{"plugin", true, "ID", "only this plugin's snapshots (default: every plugin)"}},
       .summary = "List snapshots",
       .run = snapshot_list},
      {.words = {"volume", "snapshot", "delete"},
       .arguments = "PLUGIN SNAPSHOT_ID",
       .min_args = 2,
       .max_args = 2,
       .summary = "Delete a snapshot through its controller plugin",
       .run = snapshot_delete},
      {.words = {"volume", "group-snapshot", "create"},
       .arguments = "NAME VOLUME...",
       .min_args = 2,
       .max_args = 64,
       .flags = {{"plugin", true, "ID", "the volumes' plugin (default: taken from the volumes)"}},
       .summary = "Snapshot several volumes of one plugin together (CSI group snapshot)",
       .help = "Every member is snapshotted at one point in time by the plugin's GroupController\n"
               "service; each member snapshot restores like any other (volume create with SnapshotID).\n"
               "The volumes must be in the namespace given and belong to one plugin that supports\n"
               "group snapshots. Creating the same NAME again with the same volumes creates nothing.",
       .run = group_create},
      {.words = {"volume", "group-snapshot", "list"},
       .arguments = "",
       .min_args = 0,
       .max_args = 0,
       .flags = {{"plugin", true, "ID", "only this plugin's group snapshots (default: every plugin)"}},
       .summary = "List group snapshots with their member snapshots",
       .run = group_list},
      {.words = {"volume", "group-snapshot", "delete"},
       .arguments = "PLUGIN GROUP_SNAPSHOT_ID",
       .min_args = 2,
       .max_args = 2,
       .summary = "Delete a group snapshot and every snapshot in it",
       .run = group_delete},
  };
}

}  // namespace mooring::cli
