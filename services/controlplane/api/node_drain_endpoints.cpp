// A node's scheduling eligibility and drain: the request's fields checked and handed to the
// nodes room (nodes/node_drain.hpp); the scheduler's drainer carries a drain out.
#include <cmath>
#include <set>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/nodes/node_drain.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::api {

namespace {

using domain::in_quotes;

// The node the path names (400 for a bad id, 404 when unknown), `who` ("<what> of node "n-1"") and
// the body as an object with only `allowed` keys (else the 400 naming the node and the field).
bool read_request(Context& ctx, const http::Request& req, const std::string& what, const std::set<std::string>& allowed,
                  std::string& id, std::string& who, nlohmann::json& body, http::Response& err) {
  if (!path_id(req, "id", domain::IdKind::node, id, err)) return false;
  if (!ctx.store.node(id)) {
    err = not_found("node", id);
    return false;
  }
  who = what + " of node " + in_quotes(id);
  if (!parse_body(req, body, err)) return false;
  if (!body.is_object()) {
    err = bad_request(who + ": the body must be a JSON object");
    return false;
  }
  for (const auto& [key, value] : body.items()) {
    if (allowed.contains(key)) continue;
    err = bad_request(who + ": unknown field " + in_quotes(key));
    return false;
  }
  return true;
}

bool read_flag(const nlohmann::json& body, const std::string& key, const std::string& who, bool& out,
               http::Response& err) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    err = bad_request(who + ": field " + in_quotes(key) + ": must be true or false");
    return false;
  }
  out = it->get<bool>();
  return true;
}

// "5m", "90s" (Go durations) or a number of seconds.
bool read_deadline(const nlohmann::json& body, const std::string& who, domain::Duration& out, http::Response& err) {
  auto it = body.find("Deadline");
  if (it == body.end() || it->is_null()) return true;
  const std::string field = who + ": field \"Deadline\": ";
  if (it->is_number()) {
    const double seconds = it->get<double>();
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 365.0 * 24 * 3600) {
      err = bad_request(field + "must be a number of seconds from 0 to a year, got " + it->dump());
      return false;
    }
    out = domain::Duration(static_cast<std::int64_t>(seconds * 1000));
    return true;
  }
  if (!it->is_string()) {
    err = bad_request(field + "must be a duration (\"5m\") or a number of seconds");
    return false;
  }
  auto parsed = domain::parse_duration(it->get<std::string>());
  if (!parsed) {
    err = bad_request(field + parsed.error());
    return false;
  }
  out = *parsed;
  return true;
}

http::Response committed(Context& ctx, Batch batch, const std::string& what, const std::string& node_id) {
  std::uint64_t index = ctx.store.index();
  if (!batch.empty()) {
    auto written = ctx.store.commit(std::move(batch));
    if (!written) return write_failed(what, written.error());
    index = *written;
  }
  auto out = domain::to_api_json(*ctx.store.node(node_id));
  auto res = json_ok({{"Index", index},
                      {"NodeID", node_id},
                      {"SchedulingEligibility", out["SchedulingEligibility"]},
                      {"DrainStrategy", out["DrainStrategy"]},
                      {"LastDrain", out["LastDrain"]}});
  res.index = index;
  return res;
}

}  // namespace

// PUT /v1/node/:id/eligibility {"Eligible": bool} (or Nomad's {"Eligibility": "eligible|ineligible"}).
http::Response set_node_eligibility(Context& ctx, const http::Request& req) {
  std::string id, who;
  http::Response err;
  nlohmann::json body;
  if (!read_request(ctx, req, "eligibility", {"Eligible", "Eligibility"}, id, who, body, err)) return err;
  std::optional<bool> eligible;
  if (auto it = body.find("Eligibility"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "eligible" && *it != "ineligible"))
      return bad_request(who + ": field \"Eligibility\": must be \"eligible\" or \"ineligible\"");
    eligible = *it == "eligible";
  }
  bool flag = true;
  if (body.contains("Eligible") && !body["Eligible"].is_null()) {
    if (!read_flag(body, "Eligible", who, flag, err)) return err;
    if (eligible && *eligible != flag) return bad_request(who + ": fields \"Eligible\" and \"Eligibility\" disagree");
    eligible = flag;
  }
  if (!eligible) return bad_request(who + ": field \"Eligible\" (true or false) is required");
  auto plan = plan_eligibility(ctx.store, id, *eligible, domain::now());
  if (!plan) return http::error_response(409, plan.error());
  return committed(ctx, std::move(*plan), "set the " + who, id);
}

// PUT /v1/node/:id/drain {"Deadline": "5m"|seconds, "IgnoreSystemJobs", "Disable", "MarkEligible"}.
http::Response drain_node(Context& ctx, const http::Request& req) {
  std::string id, who;
  http::Response err;
  nlohmann::json body;
  if (!read_request(ctx, req, "drain", {"Deadline", "IgnoreSystemJobs", "Disable", "MarkEligible"}, id, who, body, err))
    return err;
  DrainRequest drain;
  bool disable = false;
  if (!read_deadline(body, who, drain.deadline, err) ||
      !read_flag(body, "IgnoreSystemJobs", who, drain.ignore_system_jobs, err) ||
      !read_flag(body, "Disable", who, disable, err) || !read_flag(body, "MarkEligible", who, drain.mark_eligible, err))
    return err;
  drain.enable = !disable;
  if (drain.enable && drain.mark_eligible)
    return bad_request(who + ": field \"MarkEligible\" goes with \"Disable\": a draining node is ineligible");
  auto plan = plan_drain(ctx.store, id, drain, domain::now());
  if (!plan) return http::error_response(409, plan.error());
  return committed(ctx, std::move(*plan), who, id);
}

}  // namespace mooring::controlplane::api
