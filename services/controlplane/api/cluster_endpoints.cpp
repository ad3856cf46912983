// Plugins, nodes, events and status: read-only views (node agents write plugins and nodes), and
// the operator's node purge.
#include <charconv>
#include <functional>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/list_query.hpp"
#include "services/controlplane/nodes/node_purge.hpp"
#include "shared/domain/json.hpp"

namespace mooring::controlplane::api {

namespace {

// A node's LastHeartbeat: the stored one moves only with a commit, heartbeats that change nothing
// are not written (nodes/liveness.hpp), so the leader's memory of the last one is shown when later.
void show_last_heard(const Context& ctx, const domain::Node& node, nlohmann::json& out) {
  if (!ctx.last_heard) return;
  if (auto heard = ctx.last_heard(node.id); heard && *heard > node.last_heartbeat)
    out["LastHeartbeat"] = domain::format_time(*heard);
}

// `decorate` adds what the stored item does not hold (a node's LastHeartbeat).
template <class T>
http::Response list_stubs(const std::map<std::string, T>& items, const http::Request& req,
                          const std::function<void(const T&, nlohmann::json&)>& decorate = {}) {
  auto q = parse_list_query(req.query);
  if (!q) return bad_request(q.error());
  auto page = paginate(items, *q, [](const T&) { return true; });
  nlohmann::json out = nlohmann::json::array();
  for (const auto* item : page.items) {
    out.push_back(domain::to_api_stub(*item));
    if (decorate) decorate(*item, out.back());
  }
  auto res = json_ok(out);
  if (!page.next_token.empty()) {
    res.set_header("X-Mooring-NextToken", page.next_token);
    res.set_header("X-Nomad-NextToken", page.next_token);
  }
  return res;
}

}  // namespace

http::Response list_plugins(Context& ctx, const http::Request& req) {
  if (auto type = req.param("type"); type && *type != "csi")
    return bad_request("query parameter \"type\": only \"csi\" plugins exist, got \"" + std::string(*type) + "\"");
  return list_stubs(ctx.store.plugins(), req);
}

http::Response get_plugin(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::plugin, id, err)) return err;
  const auto* p = ctx.store.plugin(id);
  if (!p) return not_found("plugin", id);
  return json_ok(domain::to_api_json(*p));
}

http::Response list_nodes(Context& ctx, const http::Request& req) {
  return list_stubs<domain::Node>(ctx.store.nodes(), req,
                                  [&ctx](const domain::Node& n, nlohmann::json& out) { show_last_heard(ctx, n, out); });
}

http::Response get_node(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::node, id, err)) return err;
  const auto* n = ctx.store.node(id);
  if (!n) return not_found("node", id);
  auto out = domain::to_api_json(*n);
  show_last_heard(ctx, *n, out);
  return json_ok(out);
}

// Nomad's `node purge`: the node record, its plugin instances and (as lost) its allocations that
// are not terminal go, and the node's certificates issued until now stop acting (its identity is
// revoked: it enrolls again). Refused while a volume claim names the node, and while it is live
// unless ?force=true (which the route lets only a management token ask).
http::Response purge_node(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::node, id, err)) return err;
  bool force = false;
  if (!query_flag(req, "force", force, err)) return err;
  if (!ctx.store.node(id)) return not_found("node", id);
  const PurgeRequest purge{
      .reason = force ? "purged by an operator (forced)" : "purged by an operator", .revoke = true, .force = force};
  auto plan = plan_node_purge(ctx.store, id, purge, domain::now());
  if (!plan) return http::error_response(409, plan.error());
  const auto lost = plan->lost_allocations;
  auto index = ctx.store.commit(std::move(plan->batch));
  if (!index) return write_failed("purge node \"" + id + "\"", index.error());
  auto res = json_ok({{"Index", *index}, {"LostAllocations", lost}});
  res.index = *index;
  return res;
}

// Oldest first. `index=N` (the blocking-query parameter) also filters: only events after N, so
// a dashboard following the log gets each event once. `topic`, `key` and `type` filter;
// `per_page` keeps the newest that many.
http::Response list_events(Context& ctx, const http::Request& req) {
  std::uint64_t after = 0;
  if (auto idx = req.param("index")) std::from_chars(idx->data(), idx->data() + idx->size(), after);
  std::size_t per_page = 0;
  if (req.param("per_page")) {
    auto q = parse_list_query(req.query);
    if (!q) return bad_request(q.error());
    per_page = q->per_page;
  }
  auto topic = req.param("topic"), key = req.param("key"), type = req.param("type");
  std::vector<const domain::Event*> hits;
  // Events of one namespace, with those about nodes and plugins (which have none); "*": all.
  const auto& ns = request_namespace(req);
  for (const auto& e : ctx.store.events()) {
    if (e.index <= after) continue;
    if (ns != kAnyNamespace && !e.ns.empty() && e.ns != ns) continue;
    if (topic && e.topic != *topic) continue;
    if (key && e.key != *key) continue;
    if (type && e.type != *type) continue;
    hits.push_back(&e);
  }
  std::size_t skip = per_page > 0 && hits.size() > per_page ? hits.size() - per_page : 0;
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = skip; i < hits.size(); ++i) out.push_back(domain::to_api_json(*hits[i]));
  return json_ok(out);
}

http::Response health(Context&, const http::Request&) { return json_ok({{"Status", "ok"}}); }

http::Response ready(Context& ctx, const http::Request&) {
  if (!ctx.store.ready()) return http::error_response(503, "state is not loaded yet");
  return json_ok({{"Status", "ready"}, {"Index", ctx.store.index()}});
}

}  // namespace mooring::controlplane::api
