// GET /v1/metrics -> the Prometheus text exposition (?format=json: the same as JSON): the
// process's families (shared/metrics/families.hpp) and gauges computed now from the state —
// claims by state and plugin health — so no series outlives its volume or plugin.
#include <nlohmann/json.hpp>

#include "services/controlplane/api/endpoints.hpp"
#include "shared/metrics/families.hpp"

namespace mooring::controlplane::api {

std::vector<metrics::GaugeSnapshot> state_gauges(const StateStore& store) {
  using domain::ClaimState;
  metrics::GaugeSnapshot claims{"mooring_claims", "Claims by release state (taken: in use).", {}};
  std::map<ClaimState, double> by_state;
  for (auto s : {ClaimState::taken, ClaimState::unpublishing, ClaimState::node_detached,
                 ClaimState::controller_detached, ClaimState::ready_to_free})
    by_state[s] = 0;  // every state, so a rate or an alert sees 0 rather than no series
  for (const auto& [key, v] : store.volumes())
    for (const auto& [alloc, c] : v.claims) by_state[c.state] += 1;
  for (const auto& [state, n] : by_state)
    claims.samples.push_back({{{"state", std::string(domain::to_string(state))}}, n});

  metrics::GaugeSnapshot healthy{
      "mooring_plugin_healthy", "1 when the plugin's instance on the node is healthy, as last fingerprinted.", {}};
  for (const auto& [id, p] : store.plugins()) {
    for (const auto& [node, inst] : p.controllers)
      healthy.samples.push_back({{{"plugin", id}, {"node", node}, {"kind", "controller"}}, inst.healthy ? 1.0 : 0.0});
    for (const auto& [node, inst] : p.nodes)
      healthy.samples.push_back({{{"plugin", id}, {"node", node}, {"kind", "node"}}, inst.healthy ? 1.0 : 0.0});
  }
  return {std::move(claims), std::move(healthy)};
}

http::Response get_metrics(Context& ctx, const http::Request& req) {
  auto* families = metrics::families();
  if (!families) return http::error_response(404, "metrics are off on this control plane (--metrics=off)");
  const auto format = req.param("format").value_or("text");
  if (format == "json") return json_ok(families->registry.json(state_gauges(ctx.store)));
  if (format != "text" && format != "prometheus")
    return bad_request("query parameter \"format\": expected text or json, got \"" + std::string(format) + "\"");
  http::Response res;
  res.body = families->registry.text(state_gauges(ctx.store));
  res.content_type = metrics::kTextContentType;
  return res;
}

}  // namespace mooring::controlplane::api
