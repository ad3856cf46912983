// Volumes: list, read, register/update, deregister. Create/delete through a controller need node
// agents and are added with the controller routing.
#include <algorithm>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/list_query.hpp"
#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/claims/volume_rules.hpp"
#include "services/controlplane/gc/release_rules.hpp"
#include "shared/domain/json.hpp"

namespace mooring::controlplane::api {

namespace {

// The derived fields Nomad shows on a volume, from its plugin's current counts.
domain::Volume decorated(const domain::Volume& v, const StateStore& store) {
  domain::Volume out = v;
  const domain::Plugin* p = store.plugin(v.plugin_id);
  if (p) {
    out.controller_required = p->controller_required;
    out.controllers_healthy = p->controllers_healthy;
    out.controllers_expected = p->controllers_expected;
    out.nodes_healthy = p->nodes_healthy;
    out.nodes_expected = p->nodes_expected;
  }
  out.schedulable = !check_schedulable(v, p).has_value();
  return out;
}

// Registers every volume of the body in one transaction, or none.
http::Response register_all(Context& ctx, std::vector<domain::Volume> volumes) {
  Batch batch;
  std::vector<std::string> ids;
  for (auto& req : volumes) {
    if (std::find(ids.begin(), ids.end(), req.id) != ids.end())
      return bad_request("volume \"" + req.id + "\" appears twice in the request");
    const domain::Volume* existing = ctx.store.volume(req.id);
    const domain::Plugin* plugin = ctx.store.plugin(req.plugin_id);
    auto plan = plan_volume_register(existing, std::move(req), plugin);
    if (!plan) return refused(plan.refusal());
    ids.push_back(plan->volume.id);
    batch.add_event({.topic = "Volume",
                     .type = plan->created ? "VolumeRegistered" : "VolumeUpdated",
                     .key = plan->volume.id,
                     .message = std::string(plan->created ? "registered" : "updated") + " volume \"" +
                                plan->volume.id + "\" (plugin \"" + plan->volume.plugin_id + "\")",
                     .details = {{"plugin_id", plan->volume.plugin_id}}});
    batch.put(std::move(plan->volume));
  }
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("register volumes", index.error());
  nlohmann::json out = {{"Index", *index}, {"Volumes", nlohmann::json::array()}};
  for (const auto& id : ids) out["Volumes"].push_back(domain::to_api_json(decorated(*ctx.store.volume(id), ctx.store)));
  auto res = json_ok(out);
  res.index = *index;
  return res;
}

}  // namespace

http::Response list_volumes(Context& ctx, const http::Request& req) {
  auto q = parse_list_query(req.query);
  if (!q) return bad_request(q.error());
  if (auto type = req.param("type"); type && *type != "csi")
    return bad_request("query parameter \"type\": only \"csi\" volumes exist, got \"" + std::string(*type) + "\"");
  std::string plugin_id(req.param("plugin_id").value_or(""));
  std::string node_id(req.param("node_id").value_or(""));
  auto page = paginate(ctx.store.volumes(), *q, [&](const domain::Volume& v) {
    if (!plugin_id.empty() && v.plugin_id != plugin_id) return false;
    if (!node_id.empty())
      return std::any_of(v.claims.begin(), v.claims.end(), [&](const auto& c) { return c.second.node_id == node_id; });
    return true;
  });
  nlohmann::json out = nlohmann::json::array();
  for (const auto* v : page.items) out.push_back(domain::to_api_stub(decorated(*v, ctx.store)));
  auto res = json_ok(out);
  if (!page.next_token.empty()) {
    res.set_header("X-Mooring-NextToken", page.next_token);
    res.set_header("X-Nomad-NextToken", page.next_token);
  }
  return res;
}

http::Response get_volume(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) return err;
  const domain::Volume* v = ctx.store.volume(id);
  if (!v) return not_found("volume", id);
  return json_ok(domain::to_api_json(decorated(*v, ctx.store)));
}

http::Response register_volume(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) return err;
  nlohmann::json body;
  if (!parse_body(req, body, err)) return err;
  auto volumes = domain::volumes_request_from_api(body, true);
  if (!volumes) return bad_request(volumes.error());
  if (volumes->size() != 1)
    return bad_request("PUT /v1/volume/csi/" + id + " registers exactly one volume; use PUT /v1/volumes for several");
  if (volumes->front().id != id)
    return bad_request("volume \"" + volumes->front().id + "\": field \"ID\" does not match the path id \"" + id + "\"");
  return register_all(ctx, std::move(*volumes));
}

http::Response register_volumes(Context& ctx, const http::Request& req) {
  nlohmann::json body;
  http::Response err;
  if (!parse_body(req, body, err)) return err;
  auto volumes = domain::volumes_request_from_api(body, true);
  if (!volumes) return bad_request(volumes.error());
  return register_all(ctx, std::move(*volumes));
}

http::Response deregister_volume(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::volume, id, err)) return err;
  bool force = false, purge = false;
  if (!query_flag(req, "force", force, err)) return err;
  if (!query_flag(req, "purge", purge, err)) return err;
  const domain::Volume* v = ctx.store.volume(id);
  if (!v) return not_found("volume", id);
  if (v->deregistering && purge) {  // asked again: the release is under way
    auto res = json_ok({{"Index", v->modify_index}, {"Deregistering", true}}, 202);
    res.index = v->modify_index;
    return res;
  }
  auto lookup = [&](const std::string& alloc) { return ctx.store.allocation(alloc); };
  if (auto refusal = check_deregister(*v, force || purge, lookup)) return refused(*refusal);
  // The claims of terminal allocations go with the volume only once nothing is left attached for
  // them: dropping a claim mid-release would leave the volume mounted on a node or published to
  // it with nothing to undo it. Forced, that is refused; purged, the release runs first.
  const auto left = gc::release_steps_left(*v, [&](const domain::Claim& c) {
    return gc::ReleaseView{ctx.store.plugin(v->plugin_id), ctx.store.node(c.node_id),
                           ctx.store.allocation(c.allocation_id), domain::now()};
  });
  if (!left.empty() && !purge) {
    std::string steps;
    for (const auto& l : left) steps += (steps.empty() ? "" : "; ") + l;
    return http::error_response(
        409, "volume \"" + id + "\": force deregistration would drop claims whose release is not finished: " + steps +
                 ". Wait for the release (GET /v1/volume/csi/" + id +
                 " shows each claim's State and LastError), deregister with purge=true to run those steps first, "
                 "or detach a down node with DELETE /v1/volume/csi/" + id + "/detach?node=ID");
  }
  Batch batch;
  if (!left.empty()) {
    // Purge: the claim GC releases every claim, node side then controller side, and removes the
    // volume in the write that frees the last one. Meanwhile it takes no claim and no update.
    domain::Volume marked = *v;
    marked.deregistering = true;
    for (auto& [alloc, c] : marked.claims)
      if (c.state == domain::ClaimState::taken) (void)advance_claim(marked, alloc, domain::ClaimState::unpublishing, domain::now());
    batch.add_event({.topic = "Volume", .type = "VolumeDeregistrationRequested", .key = id,
                     .message = "volume \"" + id + "\" will be deregistered once its " +
                                std::to_string(marked.claims.size()) + " claim(s) are released",
                     .details = {{"plugin_id", v->plugin_id}}});
    batch.put(std::move(marked));
    auto index = ctx.store.commit(std::move(batch));
    if (!index) return write_failed("deregister volume \"" + id + "\"", index.error());
    auto res = json_ok({{"Index", *index}, {"Deregistering", true}}, 202);
    res.index = *index;
    return res;
  }
  std::string message = "deregistered volume \"" + id + "\"";
  if (!v->claims.empty()) message += " with " + std::to_string(v->claims.size()) + " claim(s) of terminal allocations (forced)";
  batch.add_event({.topic = "Volume", .type = "VolumeDeregistered", .key = id, .message = message,
                   .details = {{"plugin_id", v->plugin_id}, {"force", force ? "true" : "false"}}});
  batch.erase_volume(id);
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("deregister volume \"" + id + "\"", index.error());
  auto res = json_ok({{"Index", *index}});
  res.index = *index;
  return res;
}

}  // namespace mooring::controlplane::api
