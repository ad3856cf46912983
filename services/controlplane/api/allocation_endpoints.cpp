// Allocations: submit (validated against the volumes it names, then placed on a node — or
// checked against the node it names), list, read, stop. The node agent picks the allocation up
// through WatchAllocations and reports its status back.
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/list_query.hpp"
#include "services/controlplane/placement/placement.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/text.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane::api {

using domain::in_namespace;
using domain::in_quotes;

namespace {

// The allocation's volume requests must name registered volumes, in a mode they support.
std::optional<std::string> check_volume_requests(const StateStore& store, const domain::Allocation& a) {
  std::string who = "allocation " + in_quotes(a.name);
  for (const auto& [name, req] : a.volumes) {
    std::string field = "field \"Volumes." + name + "\"";
    auto id = domain::claimed_volume_id(req, a.index);
    const domain::Volume* v = store.volume(a.ns, id);
    if (!v) return who + ": " + field + ": volume not found" + in_namespace(a.ns) + ": " + id;
    if (!domain::has_capability(*v, req.access_mode, req.attachment_mode))
      return who + ": " + field + ": volume " + in_quotes(id) + " does not support access mode " +
             std::string(domain::to_string(req.access_mode)) + " with attachment mode " +
             std::string(domain::to_string(req.attachment_mode));
    if (!req.read_only && domain::is_read_only(req.access_mode))
      return who + ": " + field + ": access mode " + std::string(domain::to_string(req.access_mode)) +
             " is read-only; set ReadOnly";
  }
  return std::nullopt;
}

// An allocation is found only in the namespace the request acts in (the one its ACL check used).
const domain::Allocation* allocation_in(const StateStore& store, const http::Request& req, const std::string& id) {
  const auto* a = store.allocation(id);
  return a && a->ns == request_namespace(req) ? a : nullptr;
}

}  // namespace

http::Response list_allocations(Context& ctx, const http::Request& req) {
  auto q = parse_list_query(req.query);
  if (!q) return bad_request(q.error());
  std::string node_id(req.param("node_id").value_or(""));
  const auto& ns = request_namespace(req);
  auto page = paginate(ctx.store.allocations(), *q, [&](const domain::Allocation& a) {
    return (ns == kAnyNamespace || a.ns == ns) && (node_id.empty() || a.node_id == node_id);
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
  return json_ok(domain::to_api_json(*a));
}

bool requests_volumes(const http::Request& req) {
  auto body = nlohmann::json::parse(req.body, nullptr, false);
  if (body.is_discarded()) return false;  // the endpoint answers 400
  auto alloc = domain::allocation_request_from_api(body);
  return alloc && !alloc->volumes.empty();
}

http::Response submit_allocation(Context& ctx, const http::Request& req) {
  nlohmann::json body;
  http::Response err;
  if (!parse_body(req, body, err)) return err;
  auto alloc = domain::allocation_request_from_api(body);
  if (!alloc) return bad_request(alloc.error());
  auto& a = *alloc;
  a.ns = request_namespace(req);
  if (!a.node_id.empty() && !ctx.store.node(a.node_id))
    return bad_request("allocation " + in_quotes(a.name) + ": field \"NodeID\": node not found: " + a.node_id);
  std::vector<const domain::Allocation*> same_name;
  for (const auto& id : ctx.store.allocation_ids_named(a.ns, a.name)) same_name.push_back(ctx.store.allocation(id));
  a.index = next_alloc_index(same_name, a.name);
  if (auto bad = check_volume_requests(ctx.store, a)) return bad_request(*bad);
  a.id = domain::new_id();
  a.desired_status = domain::DesiredStatus::run;
  a.client_status = domain::ClientStatus::pending;
  const bool chosen = !a.node_id.empty();
  auto placed = place(a, cluster_view(ctx.store));
  if (!placed.node_id) return http::error_response(409, placed.message(a));
  a.node_id = *placed.node_id;
  a.events = {{domain::now(), "Received", (chosen ? "assigned to node " : "placed on node ") + a.node_id}};
  Batch batch;
  batch.add_event({.topic = "Allocation", .type = "AllocationSubmitted", .ns = a.ns, .key = a.id,
                   .message = "submitted allocation " + in_quotes(a.name),
                   .details = {{"node_id", a.node_id}}});
  std::string id = a.id, node = a.node_id;
  batch.put(std::move(a));
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("submit allocation", index.error());
  auto res = json_ok({{"ID", id}, {"NodeID", node}, {"Index", *index}});
  res.index = *index;
  return res;
}

http::Response stop_allocation(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::allocation, id, err)) return err;
  const auto* current = allocation_in(ctx.store, req, id);
  if (!current) return not_found("allocation", id, request_namespace(req));
  if (current->desired_status == domain::DesiredStatus::stop) {
    auto res = json_ok({{"ID", id}, {"Index", current->modify_index}});
    res.index = current->modify_index;
    return res;
  }
  domain::Allocation a = *current;
  a.desired_status = domain::DesiredStatus::stop;
  // Never placed: nothing runs and nothing is mounted, so it is done at once.
  bool unplaced = a.node_id.empty() && a.client_status == domain::ClientStatus::pending;
  if (unplaced) a.client_status = domain::ClientStatus::complete;
  a.events.push_back({domain::now(), "StopRequested", unplaced ? "stopped before placement" : "stop requested"});
  Batch batch;
  batch.add_event({.topic = "Allocation", .type = "AllocationStopRequested", .ns = a.ns, .key = id,
                   .message = "stop requested for allocation " + in_quotes(a.name),
                   .details = {{"node_id", a.node_id}}});
  batch.put(std::move(a));
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("stop allocation \"" + id + "\"", index.error());
  auto res = json_ok({{"ID", id}, {"Index", *index}});
  res.index = *index;
  return res;
}

}  // namespace mooring::controlplane::api
