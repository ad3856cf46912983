// Snapshots: create (answered per item), delete and list, through the volumes room.
#include <algorithm>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/request_params.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::api {

namespace {

using json = nlohmann::json;

bool string_field(const json& s, const char* key, std::string& out) {
  if (!s.is_object()) return false;
  auto it = s.find(key);
  if (it == s.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  out = it->get<std::string>();
  return true;
}

bool map_field(const json& s, const char* key, StringMap& out) {
  auto it = s.find(key);
  if (it == s.end() || it->is_null()) return true;
  if (!it->is_object()) return false;
  for (const auto& [k, val] : it->items()) {
    if (!val.is_string()) return false;
    out[k] = val.get<std::string>();
  }
  return true;
}

// One item of "Snapshots"; the 400 to return when it is malformed.
std::optional<http::Response> snapshot_item(const json& s, volumes::SnapshotRequest& w) {
  if (!string_field(s, "SourceVolumeID", w.volume_id) || !string_field(s, "PluginID", w.plugin_id) ||
      !string_field(s, "Name", w.name) || !map_field(s, "Secrets", w.secrets) ||
      !map_field(s, "Parameters", w.parameters))
    return bad_request(
        "snapshot: fields SourceVolumeID, PluginID, Name must be strings and Secrets, Parameters objects of strings");
  // The name, the id and both maps reach the plugin, whose C strings a NUL would cut short.
  using domain::has_nul;
  const auto map_nul = [](const StringMap& m) {
    return std::any_of(m.begin(), m.end(), [](const auto& kv) { return has_nul(kv.first) || has_nul(kv.second); });
  };
  for (const auto& [field, bad] : {std::pair{"SourceVolumeID", has_nul(w.volume_id)},
                                   {"PluginID", has_nul(w.plugin_id)},
                                   {"Name", has_nul(w.name)},
                                   {"Secrets", map_nul(w.secrets)},
                                   {"Parameters", map_nul(w.parameters)}})
    if (bad) return bad_request(std::string("snapshot: field \"") + field + "\": must not contain a NUL byte");
  if (w.volume_id.empty()) return bad_request("snapshot: field \"SourceVolumeID\" is required");
  if (w.name.empty())
    return bad_request("snapshot of volume " + domain::in_quotes(w.volume_id) + ": field \"Name\" is required");
  return std::nullopt;
}

}  // namespace

json snapshot_json(const volumes::Snapshot& s) {
  json j = {{"ID", s.id},
            {"ExternalSourceVolumeID", s.external_source_volume_id},
            {"SourceVolumeID", s.source_volume_id},
            {"SizeBytes", s.size_bytes},
            {"CreateTime", s.create_time},
            {"IsReady", s.ready},
            {"PluginID", s.plugin_id}};
  if (!s.ns.empty()) j["Namespace"] = s.ns;  // whose it is; none: no namespace owns it
  if (!s.name.empty()) j["Name"] = s.name;
  if (!s.group_snapshot_id.empty()) j["GroupSnapshotID"] = s.group_snapshot_id;
  return j;
}

namespace {

// All created: 200. Otherwise the first failure's status, and the body says what was created
// and what failed.
http::Response snapshots_answer(const volumes::SnapshotsCreated& done) {
  json out = json::array();
  for (const auto& s : done.created) out.push_back(snapshot_json(s));
  if (done.errors.empty()) return json_ok({{"Snapshots", out}, {"Index", done.index}});
  json errors = json::array();
  for (const auto& e : done.errors)
    errors.push_back({{"SourceVolumeID", e.volume_id}, {"Name", e.name}, {"Error", e.failure.message}});
  json answer = {{"Error", std::to_string(done.errors.size()) + " of " + std::to_string(done.asked) +
                               " snapshots failed: " + done.errors.front().failure.message},
                 {"Snapshots", out},
                 {"Errors", errors},
                 {"Index", done.index}};
  return http::json_response(answer.dump(), failed(done.errors.front().failure).status);
}

}  // namespace

Answer create_snapshots(Context& ctx, const http::Request& req) {
  json body;
  http::Response err;
  if (!parse_body(req, body, err)) co_return err;
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  if (!body.contains("Snapshots") || !body["Snapshots"].is_array() || body["Snapshots"].empty())
    co_return bad_request("field \"Snapshots\": a non-empty array of {SourceVolumeID, PluginID, Name} is required");
  std::vector<volumes::SnapshotRequest> planned;
  for (const auto& s : body["Snapshots"]) {
    volumes::SnapshotRequest w;
    if (auto bad = snapshot_item(s, w)) co_return *bad;
    w.ns = request_namespace(req);
    auto plan = ctx.volumes.plan_snapshot(std::move(w), *secrets);
    if (!plan) co_return failed(plan.error());
    planned.push_back(std::move(*plan));
  }
  co_return snapshots_answer(co_await ctx.volumes.create_snapshots(std::move(planned)));
}

Answer delete_snapshot(Context& ctx, const http::Request& req) {
  std::string plugin_id, snapshot_id;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  if (!required_param(req, "snapshot_id", snapshot_id, err)) co_return err;
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  auto asker = request_asker(ctx, req);
  auto index = co_await ctx.volumes.delete_snapshot(plugin_id, snapshot_id, std::move(*secrets), std::move(asker));
  if (!index) co_return failed(index.error());
  co_return json_ok({{"Index", *index}});
}

Answer list_snapshots(Context& ctx, const http::Request& req) {
  std::string plugin_id;
  volumes::PageRequest page;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  if (!page_params(req, page, err)) co_return err;
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  auto asker = request_asker(ctx, req);
  auto listed = co_await ctx.volumes.list_snapshots(plugin_id, page, std::move(*secrets), std::move(asker));
  if (!listed) co_return failed(listed.error());
  json out = json::array();
  for (const auto& s : listed->items) out.push_back(snapshot_json(s));
  co_return json_ok({{"Snapshots", out}, {"NextToken", listed->next_token}});
}

}  // namespace mooring::controlplane::api
