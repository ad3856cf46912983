// Group snapshots: create (every volume of the group checked first), list, read and delete,
// through the volumes room. Secrets go to the plugin only; no answer carries them.
#include <optional>
#include <string_view>
#include <vector>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/request_params.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/domain/json/reader.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::api {

namespace {

using json = nlohmann::json;
namespace codec = domain::codec;

// {"GroupSnapshot":{"Name","PluginID","SourceVolumeIDs":[...],"Secrets":{},"Parameters":{}}},
// strictly: an unknown field is a 400 naming it. "Namespace" was resolved before the endpoint.
std::optional<http::Response> group_request(const json& body, volumes::GroupSnapshotRequest& w) {
  codec::Ctx ctx{.object = "group snapshot", .error = {}};
  codec::Reader top(body, ctx, "", /*strict=*/true);
  if (!top.has("GroupSnapshot"))
    return bad_request("field \"GroupSnapshot\": an object {Name, PluginID, SourceVolumeIDs} is required");
  top.object("GroupSnapshot", [&](codec::Reader& r) {
    std::string ignored_ns;
    r.str("Name", w.name);
    r.str("PluginID", w.plugin_id);
    r.string_list("SourceVolumeIDs", w.volume_ids);
    r.string_map("Secrets", w.secrets);
    r.string_map("Parameters", w.parameters);
    r.str("Namespace", ignored_ns);
  });
  std::string top_ns;  // {"Namespace": ...} beside the object is accepted too
  top.str("Namespace", top_ns);
  top.finish();
  if (ctx.error) return bad_request(*ctx.error);
  if (w.name.empty()) return bad_request("group snapshot: field \"GroupSnapshot.Name\" is required");
  return std::nullopt;
}

json group_json(const volumes::GroupSnapshot& g) {
  json members = json::array();
  for (const auto& s : g.snapshots) members.push_back(snapshot_json(s));
  json j = {{"ID", g.id},
            {"PluginID", g.plugin_id},
            {"CreateTime", g.create_time},
            {"IsReady", g.ready},
            {"Snapshots", members}};
  if (!g.name.empty()) j["Name"] = g.name;
  return j;
}

// "a,b,c" -> its non-empty parts.
std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    auto part = text.substr(0, comma);
    if (!part.empty()) out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

Answer create_group_snapshot(Context& ctx, const http::Request& req) {
  json body;
  http::Response err;
  if (!parse_body(req, body, err)) co_return err;
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  volumes::GroupSnapshotRequest w;
  if (auto bad = group_request(body, w)) co_return *bad;
  w.ns = request_namespace(req);
  auto plan = ctx.volumes.plan_group_snapshot(std::move(w), *secrets);
  if (!plan) co_return failed(plan.error());
  auto made = co_await ctx.volumes.create_group_snapshot(std::move(*plan));
  if (!made) co_return failed(made.error());
  co_return json_ok({{"GroupSnapshot", group_json(*made)}, {"Index", made->index}});
}

Answer list_group_snapshots(Context& ctx, const http::Request& req) {
  std::string plugin_id;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  auto asker = request_asker(ctx, req);
  auto listed = co_await ctx.volumes.list_group_snapshots(plugin_id, std::move(*secrets), std::move(asker));
  if (!listed) co_return failed(listed.error());
  json out = json::array();
  for (const auto& g : *listed) out.push_back(group_json(g));
  co_return json_ok({{"GroupSnapshots", out}});
}

Answer get_group_snapshot(Context& ctx, const http::Request& req) {
  std::string plugin_id;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  auto it = req.params.find("id");
  const std::string group_id = it == req.params.end() ? std::string{} : it->second;
  if (group_id.empty()) co_return bad_request("a group snapshot id is required in the path");
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  auto asker = request_asker(ctx, req);
  auto got = co_await ctx.volumes.get_group_snapshot(plugin_id, group_id, std::move(*secrets), std::move(asker));
  if (!got) co_return failed(got.error());
  co_return json_ok({{"GroupSnapshot", group_json(*got)}, {"Index", got->index}});
}

Answer delete_group_snapshot(Context& ctx, const http::Request& req) {
  std::string plugin_id, group_id;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  if (!required_param(req, "group_snapshot_id", group_id, err)) co_return err;
  // Optional: the members to name in DeleteVolumeGroupSnapshot, for a plugin that cannot list
  // its snapshots; by default they are the ones ListSnapshots shows in the group.
  std::vector<std::string> members = split_list(req.param("snapshot_ids").value_or(""));
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  auto asker = request_asker(ctx, req);
  auto index = co_await ctx.volumes.delete_group_snapshot(plugin_id, group_id, std::move(members), std::move(*secrets),
                                                          std::move(asker));
  if (!index) co_return failed(index.error());
  co_return json_ok({{"Index", *index}});
}

}  // namespace mooring::controlplane::api
