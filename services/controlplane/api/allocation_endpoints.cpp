// Allocations: list, read, submit, stop, and the rolling update of a plugin allocation (PUT with a
// new Task). Reads come from the state store; writes parse the request and hand it to the
// allocations room (allocations/allocations.hpp), whose answer becomes the response. The node
// agent picks an allocation up through WatchAllocations; the system reconciler
// (scheduler/system_reconciler.hpp) keeps groups whole and drives rollouts.
#include <algorithm>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/list_query.hpp"
#include "services/controlplane/allocations/allocations.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/text.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane::api {

using domain::in_quotes;

namespace {

// An allocation is found only in the namespace the request acts in (the one its ACL check used).
const domain::Allocation* allocation_in(const StateStore& store, const http::Request& req, const std::string& id) {
  const auto* a = store.allocation(id);
  return a && a->ns == request_namespace(req) ? a : nullptr;
}

// The group's copies as the API shows them, with the group's restart bookkeeping for each node.
nlohmann::json copies_json(const StateStore& store, const domain::Allocation& group) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [node, c] : allocations::shown_copies(store, group)) {
    nlohmann::json j = {{"NodeID", node},
                        {"AllocID", c ? c->id : ""},
                        {"ClientStatus", c ? std::string(domain::to_string(c->client_status)) : ""},
                        {"DesiredStatus", c ? std::string(domain::to_string(c->desired_status)) : ""},
                        {"Restarts", 0}};
    if (auto it = group.system_nodes.find(node); it != group.system_nodes.end()) {
      j["Restarts"] = it->second.restarts;
      if (domain::is_set(it->second.next_restart)) j["NextRestart"] = domain::format_time(it->second.next_restart);
      if (it->second.stopped) j["Stopped"] = true;
      if (!it->second.message.empty()) j["Message"] = it->second.message;
    }
    out.push_back(std::move(j));
  }
  return out;
}

http::Response indexed(const nlohmann::json& body, std::uint64_t index) {
  auto res = json_ok(body);
  res.index = index;
  return res;
}

nlohmann::json submitted_json(const allocations::Submitted& s) {
  if (!s.system) return {{"ID", s.id}, {"NodeID", s.node_id}, {"Index", s.index}};
  nlohmann::json copies = nlohmann::json::array();
  for (const auto& c : s.copies) copies.push_back({{"NodeID", c.node_id}, {"AllocID", c.alloc_id}});
  nlohmann::json out = {{"ID", s.id}, {"System", true}, {"Copies", copies}, {"Index", s.index}};
  if (s.copies.empty()) out["Message"] = "no eligible node yet: a copy is placed on each node that joins and matches";
  return out;
}

// The Task of a PUT /v1/allocation/:id body ({"Task": {...}}, nothing else), read by the
// allocation's own codec so its errors name the field as a submit does; the 400 when it is not that.
std::optional<http::Response> update_task_of(const nlohmann::json& body, const domain::Allocation& current,
                                             std::optional<domain::Task>& task) {
  if (!body.is_object()) return bad_request("request: must be an object with a \"Task\"");
  for (const auto& [key, value] : body.items())
    if (key != "Task")
      return bad_request("request: field " + in_quotes(key) + ": unknown field (only \"Task\" updates in place)");
  if (!body.contains("Task")) return bad_request("request: field \"Task\": required");
  auto parsed = domain::allocation_request_from_api({{"Allocation", {{"Name", current.name}, {"Task", body["Task"]}}}});
  if (!parsed) return bad_request(parsed.error());
  task = std::move(parsed->task);
  return std::nullopt;
}

}  // namespace

http::Response list_allocations(Context& ctx, const http::Request& req) {
  auto q = parse_list_query(req.query);
  if (!q) return bad_request(q.error());
  std::string node_id(req.param("node_id").value_or(""));
  std::string system_id(req.param("system_id").value_or(""));
  const auto& ns = request_namespace(req);
  auto page = paginate(ctx.store.allocations(), *q, [&](const domain::Allocation& a) {
    return (ns == kAnyNamespace || a.ns == ns) && (node_id.empty() || a.node_id == node_id) &&
           (system_id.empty() || a.system_id == system_id);
  });
  nlohmann::json out = nlohmann::json::array();
  for (const auto* a : page.items) out.push_back(domain::to_api_stub(*a));
  auto res = json_ok(out);
  if (!page.next_token.empty()) {
    res.set_header("X-Mooring-NextToken", page.next_token);
    res.set_header("X-Nomad-NextToken", page.next_token);
  }
  return res;
}

http::Response get_allocation(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::allocation, id, err)) return err;
  const auto* a = allocation_in(ctx.store, req, id);
  if (!a) return not_found("allocation", id, request_namespace(req));
  auto out = domain::to_api_json(*a);
  if (a->system) out["Copies"] = copies_json(ctx.store, *a);
  return json_ok(out);
}

std::optional<std::uint64_t> allocation_watch_index(const StateStore& store, const http::Request& req) {
  auto it = req.params.find("id");
  if (it == req.params.end()) return std::nullopt;
  const auto* a = allocation_in(store, req, it->second);
  // A system group's answer shows its copies, which change without it: it waits for the table.
  if (!a || a->system) return std::nullopt;
  return a->modify_index;
}

bool requests_volumes(const http::Request& req) {
  auto body = nlohmann::json::parse(req.body, nullptr, false);
  if (body.is_discarded()) return false;  // the endpoint answers 400
  auto alloc = domain::allocation_request_from_api(body);
  return alloc && !alloc->volumes.empty();
}

// Read from the raw JSON, not the validated request: a body that would fail validation still
// names the plugin, and the caller is told about the right before the field.
bool deploys_plugin(const http::Request& req) {
  auto body = nlohmann::json::parse(req.body, nullptr, false);
  if (!body.is_object()) return false;
  const auto& outer = body.contains("Allocation") ? body["Allocation"] : body;
  if (!outer.is_object() || !outer.contains("Task") || !outer["Task"].is_object()) return false;
  const auto& task = outer["Task"];
  return task.contains("CSIPlugin") && !task["CSIPlugin"].is_null();
}

bool names_plugin_allocation(const StateStore& store, const http::Request& req) {
  auto it = req.params.find("id");
  if (it == req.params.end()) return false;
  const auto* a = allocation_in(store, req, it->second);
  return a && a->task && a->task->csi_plugin;
}

http::Response submit_allocation(Context& ctx, const http::Request& req) {
  nlohmann::json body;
  http::Response err;
  if (!parse_body(req, body, err)) return err;
  auto alloc = domain::allocation_request_from_api(body);
  if (!alloc) return bad_request(alloc.error());
  alloc->ns = request_namespace(req);
  auto submitted = allocations::submit(ctx.store, std::move(*alloc));
  if (!submitted) return failed(submitted.error());
  return indexed(submitted_json(*submitted), submitted->index);
}

http::Response stop_allocation(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::allocation, id, err)) return err;
  const auto* current = allocation_in(ctx.store, req, id);
  if (!current) return not_found("allocation", id, request_namespace(req));
  auto stopped = allocations::stop(ctx.store, *current);
  if (!stopped) return failed(stopped.error());
  nlohmann::json out = {{"ID", id}, {"Index", stopped->index}};
  if (stopped->group) out["StoppedCopies"] = stopped->stopped_copies;
  if (!stopped->warnings.empty()) out["Warnings"] = stopped->warnings;
  return indexed(out, stopped->index);
}

// PUT /v1/allocation/:id {"Task": {...}}: a rolling update of a plugin allocation.
http::Response update_allocation(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  nlohmann::json body;
  if (!path_id(req, "id", domain::IdKind::allocation, id, err) || !parse_body(req, body, err)) return err;
  const auto* current = allocation_in(ctx.store, req, id);
  if (!current) return not_found("allocation", id, request_namespace(req));
  std::optional<domain::Task> task;
  if (auto bad = update_task_of(body, *current, task)) return *bad;
  auto updated = allocations::update_task(ctx.store, *current, std::move(task));
  if (!updated) return failed(updated.error());
  nlohmann::json out = {
      {"ID", id}, {"Index", updated->index}, {"Rollout", domain::to_api_json(updated->allocation)["Rollout"]}};
  if (!updated->new_id.empty()) {
    out["NewID"] = updated->new_id;
    out["Message"] = "allocation " + in_quotes(updated->new_id) + " replaces " + in_quotes(id) +
                     " once its plugin instance is healthy";
  }
  return indexed(out, updated->index);
}

}  // namespace mooring::controlplane::api
