// Snapshot endpoints: create (per item, an uncertain create negated in the background), delete,
// list, through a controller of the volume's plugin (ControllerEndpoints' routes).
#include "services/controlplane/api/controller_endpoints.hpp"

#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/api/controller_support.hpp"
#include "shared/async/retry.hpp"

namespace mooring::controlplane::api {

namespace asio = boost::asio;

// ---- snapshots ----

asio::awaitable<http::Response> ControllerEndpoints::create_snapshot(http::Request req) {
  json body;
  http::Response err;
  if (!parse_body(req, body, err)) co_return err;
  StringMap extra;
  if (!header_secrets(req, extra, err)) co_return err;
  if (!body.is_object() || !body.contains("Snapshots") || !body["Snapshots"].is_array() || body["Snapshots"].empty())
    co_return bad_request("field \"Snapshots\": a non-empty array of {SourceVolumeID, PluginID, Name} is required");

  struct Wanted {
    std::string volume_id, plugin_id, name, external_id;
    StringMap secrets, parameters;
  };
  std::vector<Wanted> wanted;
  for (const auto& s : body["Snapshots"]) {
    Wanted w;
    auto str = [&](const char* key, std::string& out) -> bool {
      if (!s.is_object()) return false;
      auto it = s.find(key);
      if (it == s.end() || it->is_null()) return true;
      if (!it->is_string()) return false;
      out = it->get<std::string>();
      return true;
    };
    auto map = [&](const char* key, StringMap& out) -> bool {
      auto it = s.find(key);
      if (it == s.end() || it->is_null()) return true;
      if (!it->is_object()) return false;
      for (const auto& [k, val] : it->items()) {
        if (!val.is_string()) return false;
        out[k] = val.get<std::string>();
      }
      return true;
    };
    if (!str("SourceVolumeID", w.volume_id) || !str("PluginID", w.plugin_id) || !str("Name", w.name) ||
        !map("Secrets", w.secrets) || !map("Parameters", w.parameters))
      co_return bad_request("snapshot: fields SourceVolumeID, PluginID, Name must be strings and Secrets, Parameters objects of strings");
    if (w.volume_id.empty()) co_return bad_request("snapshot: field \"SourceVolumeID\" is required");
    if (w.name.empty()) co_return bad_request("snapshot of volume " + in_quotes(w.volume_id) + ": field \"Name\" is required");
    const auto* v = store_.volume(w.volume_id);
    if (!v) co_return not_found("volume", w.volume_id);
    if (v->deleting)
      co_return http::error_response(409, "snapshot " + in_quotes(w.name) + ": volume " + in_quotes(w.volume_id) + " " +
                                              std::string(domain::kBeingDeleted));
    if (w.plugin_id.empty()) w.plugin_id = v->plugin_id;
    if (w.plugin_id != v->plugin_id)
      co_return bad_request("snapshot " + in_quotes(w.name) + ": volume " + in_quotes(w.volume_id) + " belongs to plugin " +
                            in_quotes(v->plugin_id) + ", not " + in_quotes(w.plugin_id));
    const auto* p = store_.plugin(w.plugin_id);
    if (p && !p->controllers.empty() && !controller_supports(*p, &domain::ControllerInfo::supports_create_delete_snapshot))
      co_return bad_request("snapshot " + in_quotes(w.name) + ": plugin " + in_quotes(w.plugin_id) +
                            " does not support CREATE_DELETE_SNAPSHOT");
    w.external_id = v->external_id;
    StringMap merged = v->secrets;
    for (auto& [k, val] : w.secrets) merged[k] = val;
    for (auto& [k, val] : extra) merged[k] = val;
    w.secrets = std::move(merged);
    wanted.push_back(std::move(w));
  }

  // Each snapshot is its own CSI call and is answered per item: one that fails does not hide the
  // ones created before it (CreateSnapshot is idempotent by name, so sending the request again
  // after a failure creates nothing twice).
  json out = json::array();
  json errors = json::array();
  std::optional<http::Response> first_failure;
  for (const auto& w : wanted) {
    ::csi::v1::CreateSnapshotRequest csi;
    csi.set_source_volume_id(w.external_id);
    csi.set_name(w.name);
    put_secrets(csi.mutable_secrets(), w.secrets);
    for (const auto& [k, val] : w.parameters) (*csi.mutable_parameters())[k] = val;
    auto res = co_await router_.create_snapshot(w.plugin_id, w.volume_id, csi);
    if (!res.ok()) {
      if (res.outcome == csi::Outcome::uncertain)
        tasks_.spawn("negate snapshot " + w.name, negate_snapshot(w.plugin_id, csi));
      auto failure = plugin_failure(res);
      const auto said = json::parse(failure.body, nullptr, false);
      errors.push_back({{"SourceVolumeID", w.volume_id},
                        {"Name", w.name},
                        {"Error", said.is_object() ? said.value("Error", res.error) : res.error}});
      if (!first_failure) first_failure = std::move(failure);
      continue;
    }
    out.push_back(snapshot_json(res.response.snapshot(), w.plugin_id, store_, w.name));
    Batch batch;
    batch.add_event({.topic = "Volume",
                     .type = "SnapshotCreated",
                     .key = w.volume_id,
                     .message = "created snapshot " + in_quotes(res.response.snapshot().snapshot_id()) + " of volume " +
                                in_quotes(w.volume_id),
                     .details = {{"plugin_id", w.plugin_id}, {"snapshot_id", res.response.snapshot().snapshot_id()}}});
    (void)store_.commit(std::move(batch));
  }
  if (!first_failure) co_return json_ok({{"Snapshots", out}, {"Index", store_.index()}});
  // The first failure's status; the body says what was created and what failed.
  json answer = {{"Error", std::to_string(errors.size()) + " of " + std::to_string(wanted.size()) +
                               " snapshots failed: " + errors[0].value("Error", std::string())},
                 {"Snapshots", out},
                 {"Errors", errors},
                 {"Index", store_.index()}};
  co_return http::json_response(answer.dump(), first_failure->status);
}

asio::awaitable<void> ControllerEndpoints::negate_snapshot(std::string plugin_id, ::csi::v1::CreateSnapshotRequest request) {
  std::function<asio::awaitable<async::Attempt>(unsigned)> attempt = [&](unsigned) -> asio::awaitable<async::Attempt> {
        std::string unserialized;
        auto made = co_await router_.create_snapshot(plugin_id, unserialized, request);
        if (!made.ok())
          co_return made.outcome == csi::Outcome::final_error ? async::Attempt::final_error(made.error)
                                                              : async::Attempt::again(made.error);
        ::csi::v1::DeleteSnapshotRequest del;
        del.set_snapshot_id(made.response.snapshot().snapshot_id());
        *del.mutable_secrets() = request.secrets();
        auto gone = co_await router_.delete_snapshot(plugin_id, del);
        co_return gone.done() ? async::Attempt::ok() : async::Attempt::again(gone.error);
      };
  auto result = co_await async::retry(std::move(attempt), negation_retry());
  if (!result.ok())
    log_.warn("cannot negate an abandoned snapshot; the plugin may hold an unregistered snapshot",
              {{"plugin_id", plugin_id}, {"name", request.name()}, {"error", result.last_error}});
}

asio::awaitable<http::Response> ControllerEndpoints::delete_snapshot(http::Request req) {
  std::string plugin_id, snapshot_id;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  if (!required_param(req, "snapshot_id", snapshot_id, err)) co_return err;
  StringMap secrets;
  if (!header_secrets(req, secrets, err)) co_return err;
  if (!store_.plugin(plugin_id)) co_return not_found("plugin", plugin_id);
  ::csi::v1::DeleteSnapshotRequest csi;
  csi.set_snapshot_id(snapshot_id);
  put_secrets(csi.mutable_secrets(), secrets);
  auto res = co_await router_.delete_snapshot(plugin_id, csi);
  if (!res.done()) co_return plugin_failure(res);
  co_return json_ok({{"Index", store_.index()}});
}

asio::awaitable<http::Response> ControllerEndpoints::list_snapshots(http::Request req) {
  std::string plugin_id, token;
  std::int32_t max_entries = 0;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  if (!page_params(req, max_entries, token, err)) co_return err;
  StringMap secrets;
  if (!header_secrets(req, secrets, err)) co_return err;
  if (!store_.plugin(plugin_id)) co_return not_found("plugin", plugin_id);
  ::csi::v1::ListSnapshotsRequest csi;
  csi.set_max_entries(max_entries);
  csi.set_starting_token(token);
  put_secrets(csi.mutable_secrets(), secrets);
  auto res = co_await router_.list_snapshots(plugin_id, csi);
  if (!res.ok()) co_return listing_failure(res, token, plugin_id);
  json out = json::array();
  for (const auto& e : res.response.entries()) out.push_back(snapshot_json(e.snapshot(), plugin_id, store_));
  co_return json_ok({{"Snapshots", out}, {"NextToken", res.response.next_token()}});
}

}  // namespace mooring::controlplane::api
