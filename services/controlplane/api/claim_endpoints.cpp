// Claims as objects: list (filtered by volume, node, allocation, namespace and state) and read,
// each with the step its release is at; an operator's release of one claim, which the claim GC
// runs in the usual order. Reads come from the state store through the volumes room's view.
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/volumes/claim_view.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/domain/json.hpp"

namespace mooring::controlplane::api {

namespace {

using json = nlohmann::json;

json claim_json(const volumes::ClaimView& c) {
  json out = domain::to_api_json(c.claim);
  out["ID"] = volumes::claim_id(c.volume_id, c.claim.allocation_id);
  out["Namespace"] = c.ns;
  out["VolumeID"] = c.volume_id;
  out["PluginID"] = c.plugin_id;
  out["ReleaseStep"] = c.release_step;
  out["ReleaseReason"] = c.release_reason;
  return out;
}

std::string path_claim_id(const http::Request& req) {
  auto it = req.params.find("id");
  return it == req.params.end() ? std::string() : it->second;
}

// The claim a path's id names in the request's namespace; the 400 when the id is malformed.
std::optional<http::Response> claim_ref(const http::Request& req, volumes::ClaimRef& out) {
  std::string why;
  auto ref = volumes::parse_claim_id(path_claim_id(req), why);
  if (!ref) return bad_request("path segment \"id\": " + why);
  out = std::move(*ref);
  return std::nullopt;
}

}  // namespace

http::Response list_claims(Context& ctx, const http::Request& req) {
  volumes::ClaimFilter f;
  f.ns = request_namespace(req);
  f.volume_id = req.param("volume").value_or("");
  f.node_id = req.param("node").value_or("");
  f.allocation_id = req.param("allocation").value_or("");
  if (auto state = req.param("state")) {
    f.state = domain::parse_claim_state(*state);
    if (!f.state)
      return bad_request("query parameter \"state\": \"" + std::string(*state) +
                         "\" is not one of taken, unpublishing, node-detached, controller-detached, ready-to-free");
  }
  json out = json::array();
  for (const auto& c : volumes::list_claims(ctx.store, f)) out.push_back(claim_json(c));
  return json_ok(out);
}

http::Response get_claim(Context& ctx, const http::Request& req) {
  volumes::ClaimRef ref;
  if (auto err = claim_ref(req, ref)) return *err;
  const auto& ns = request_namespace(req);
  auto c = volumes::find_claim(ctx.store, domain::volume_key(ns, ref.volume_id), ref.allocation_id);
  if (!c) return not_found("claim", path_claim_id(req), ns);
  return json_ok(claim_json(*c));
}

http::Response release_claim(Context& ctx, const http::Request& req) {
  volumes::ClaimRef ref;
  if (auto err = claim_ref(req, ref)) return *err;
  const auto key = domain::volume_key(request_namespace(req), ref.volume_id);
  auto done = ctx.volumes.release_claim(key, ref.allocation_id);
  if (!done) return failed(done.error());
  auto c = volumes::find_claim(ctx.store, key, ref.allocation_id);
  json out = {{"Index", done->index}};
  if (c) out["Claim"] = claim_json(*c);  // freed already (nothing left to do): no claim
  auto res = json_ok(out);
  res.index = done->index;
  return res;
}

}  // namespace mooring::controlplane::api
