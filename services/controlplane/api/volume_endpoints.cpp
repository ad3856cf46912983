// Volumes: every /v1/volume/csi/:id verb and the volume lists. Reads come from the state store;
// writes parse the request and hand it to the volumes room, whose answer becomes the response.
#include <algorithm>
#include <optional>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/list_query.hpp"
#include "services/controlplane/api/request_params.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "services/controlplane/volumes/volume_view.hpp"
#include "shared/domain/json.hpp"

namespace mooring::controlplane::api {

namespace {

using json = nlohmann::json;

http::Response indexed(json body, std::uint64_t index, unsigned status = 200) {
  auto res = json_ok(body, status);
  res.index = index;
  return res;
}

http::Response written(const volumes::Outcome<volumes::Written>& w) {
  if (!w) return failed(w.error());
  json out = {{"Index", w->index}, {"Volumes", json::array()}};
  for (const auto& v : w->volumes) out["Volumes"].push_back(domain::to_api_json(v));
  return indexed(std::move(out), w->index);
}

// The one volume of a PUT /v1/volume/csi/:id body (`verb` ends the error that names the route);
// the 400 to return when the request is not that.
std::optional<http::Response> one_volume(const http::Request& req, bool registering, const std::string& verb,
                                         domain::Volume& out) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) return err;
  json body;
  if (!parse_body(req, body, err)) return err;
  auto volumes = domain::volumes_request_from_api(body, registering);
  if (!volumes) return bad_request(volumes.error());
  if (volumes->size() != 1) return bad_request("PUT /v1/volume/csi/" + id + verb);
  if (volumes->front().id != id)
    return bad_request("volume \"" + volumes->front().id + "\": field \"ID\" does not match the path id \"" + id +
                       "\"");
  out = std::move(volumes->front());
  out.ns = request_namespace(req);
  return std::nullopt;
}

}  // namespace

http::Response list_volumes(Context& ctx, const http::Request& req) {
  auto q = parse_list_query(req.query);
  if (!q) return bad_request(q.error());
  if (auto type = req.param("type"); type && *type != "csi")
    return bad_request("query parameter \"type\": only \"csi\" volumes exist, got \"" + std::string(*type) + "\"");
  std::string plugin_id(req.param("plugin_id").value_or(""));
  std::string node_id(req.param("node_id").value_or(""));
  // Keys sort by namespace, then id: one namespace is a key range; "*" filters ids by prefix.
  const auto& ns = request_namespace(req);
  const bool every = ns == kAnyNamespace;
  const std::string id_prefix = q->prefix;
  q->prefix = every ? std::string() : domain::volume_key(ns, id_prefix);
  auto page = paginate(ctx.store.volumes(), *q, [&](const domain::Volume& v) {
    if (every ? !v.id.starts_with(id_prefix) : v.ns != ns) return false;
    if (!plugin_id.empty() && v.plugin_id != plugin_id) return false;
    if (!node_id.empty())
      return std::any_of(v.claims.begin(), v.claims.end(), [&](const auto& c) { return c.second.node_id == node_id; });
    return true;
  });
  json out = json::array();
  for (const auto* v : page.items) out.push_back(domain::to_api_stub(volumes::decorated(*v, ctx.store)));
  auto res = json_ok(out);
  if (!page.next_token.empty()) {
    res.set_header("X-Mooring-NextToken", page.next_token);
    res.set_header("X-Nomad-NextToken", page.next_token);
  }
  return res;
}

// ?stats=refresh: the claims' nodes poll NodeGetVolumeStats first, so Claims[].Usage and
// Claims[].Condition are current rather than as of the last periodic poll.
Answer get_volume(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  if (auto stats = req.param("stats")) {
    if (*stats != "refresh")
      co_return bad_request("query parameter \"stats\": only \"refresh\" is known, got \"" + std::string(*stats) +
                            "\"");
    if (ctx.store.volume(request_namespace(req), id)) {
      auto refreshed = co_await ctx.volumes.refresh_stats(domain::volume_key(request_namespace(req), id));
      if (!refreshed) co_return failed(refreshed.error());
    }
  }
  const domain::Volume* v = ctx.store.volume(request_namespace(req), id);
  if (!v) co_return not_found("volume", id, request_namespace(req));
  co_return json_ok(domain::to_api_json(volumes::decorated(*v, ctx.store)));
}

std::optional<std::uint64_t> volume_watch_index(const StateStore& store, const http::Request& req) {
  auto it = req.params.find("id");
  if (it == req.params.end()) return std::nullopt;
  const domain::Volume* v = store.volume(request_namespace(req), it->second);
  return v ? std::optional<std::uint64_t>(v->modify_index) : std::nullopt;
}

// A re-registration that raises RequestedCapacityMin above the capacity expands the volume.
Answer register_volume(Context& ctx, const http::Request& req) {
  domain::Volume v;
  if (auto err = one_volume(req, true, " registers exactly one volume; use PUT /v1/volumes for several", v))
    co_return *err;
  auto asker = request_asker(ctx, req);
  co_return written(co_await ctx.volumes.register_or_expand(std::move(v), header_secrets(req), std::move(asker)));
}

Answer register_volumes(Context& ctx, const http::Request& req) {
  json body;
  http::Response err;
  if (!parse_body(req, body, err)) co_return err;
  auto volumes = domain::volumes_request_from_api(body, true);
  if (!volumes) co_return bad_request(volumes.error());
  for (auto& v : *volumes) v.ns = request_namespace(req);
  auto asker = request_asker(ctx, req);
  co_return written(co_await ctx.volumes.register_volumes(std::move(*volumes), std::move(asker)));
}

Answer deregister_volume(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  bool force = false, purge = false;
  if (!query_flag(req, "force", force, err)) co_return err;
  if (!query_flag(req, "purge", purge, err)) co_return err;
  auto done = ctx.volumes.deregister(domain::volume_key(request_namespace(req), id), force, purge);
  if (!done) co_return failed(done.error());
  if (done->pending) co_return indexed({{"Index", done->index}, {"Deregistering", true}}, done->index, 202);
  co_return indexed({{"Index", done->index}}, done->index);
}

Answer create_volume(Context& ctx, const http::Request& req) {
  domain::Volume v;
  if (auto err = one_volume(req, false, "/create creates exactly one volume", v)) co_return *err;
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  for (auto& [k, val] : *secrets) v.secrets[k] = val;
  auto asker = request_asker(ctx, req);
  co_return written(co_await ctx.volumes.create(std::move(v), std::move(asker)));
}

Answer modify_volume(Context& ctx, const http::Request& req) {
  std::string id;
  json body;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  if (!parse_body(req, body, err)) co_return err;
  auto wanted = domain::modify_request_from_api(body, id);
  if (!wanted) co_return bad_request(wanted.error());
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  const auto key = domain::volume_key(request_namespace(req), id);
  co_return written(co_await ctx.volumes.modify(key, std::move(*wanted), std::move(*secrets)));
}

Answer delete_volume(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  auto secrets = header_secrets(req);
  if (!secrets) co_return bad_request(secrets.error());
  auto index = co_await ctx.volumes.remove(domain::volume_key(request_namespace(req), id), *secrets);
  if (!index) co_return failed(index.error());
  co_return indexed({{"Index", *index}}, *index);
}

Answer detach_volume(Context& ctx, const http::Request& req) {
  std::string id, node_id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) co_return err;
  if (!required_param(req, "node", node_id, err)) co_return err;
  if (auto ok = domain::validate_node_id(node_id); !ok)
    co_return bad_request("query parameter \"node\": " + ok.error());
  auto done = ctx.volumes.detach(domain::volume_key(request_namespace(req), id), node_id);
  if (!done) co_return failed(done.error());
  json claims = json::array();
  for (const auto& c : done->claims) claims.push_back(domain::to_api_json(c));
  co_return indexed({{"Index", done->index}, {"Claims", claims}}, done->index);
}

Answer list_external_volumes(Context& ctx, const http::Request& req) {
  std::string plugin_id;
  volumes::PageRequest page;
  http::Response err;
  if (!required_param(req, "plugin_id", plugin_id, err)) co_return err;
  if (!page_params(req, page, err)) co_return err;
  auto asker = request_asker(ctx, req);
  auto listed = co_await ctx.volumes.list_external(plugin_id, page, std::move(asker));
  if (!listed) co_return failed(listed.error());
  json out = json::array();
  for (const auto& v : listed->items) {
    json item = {{"ExternalID", v.external_id},
                 {"CapacityBytes", v.capacity},
                 {"VolumeContext", json(v.context)},
                 {"SnapshotID", v.snapshot_id},
                 {"CloneID", v.clone_id},
                 {"PublishedExternalNodeIDs", v.published_node_ids},
                 {"IsAbnormal", v.abnormal},
                 {"Status", v.status}};
    if (!v.volume_id.empty()) {  // the volume that registers it
      item["Namespace"] = v.ns;
      item["VolumeID"] = v.volume_id;
    }
    out.push_back(std::move(item));
  }
  co_return json_ok({{"Volumes", out}, {"NextToken", listed->next_token}});
}

}  // namespace mooring::controlplane::api
