// Allocations: submit (validated against the volumes it names, then placed on a node — or
// checked against the node it names; a system allocation is a group with one copy per eligible
// node), list, read, stop, and the rolling update of a plugin allocation (PUT with a new Task).
// The node agent picks the allocation up through WatchAllocations and reports its status back;
// the system reconciler (gc/system_reconciler.hpp) keeps groups whole and drives rollouts.
#include <algorithm>

#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/list_query.hpp"
#include "services/controlplane/gc/system_reconciler.hpp"
#include "services/controlplane/placement/placement.hpp"
#include "services/controlplane/placement/system_placement.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/text.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane::api {

using domain::in_namespace;
using domain::in_quotes;

namespace {

// 409 naming why each node was refused; 503 (retry) while a plugin's health there is not known yet.
http::Response unplaced(const PlacementResult& placed, const domain::Allocation& a) {
  return placed.health_unknown ? retry_later(placed.message(a)) : http::error_response(409, placed.message(a));
}

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

// The group's copies as the API shows them: per node its live copy (else its newest), with the
// group's restart bookkeeping for that node.
nlohmann::json copies_json(const StateStore& store, const domain::Allocation& group) {
  std::map<std::string, const domain::Allocation*> shown;  // node -> copy
  for (const auto& id : store.allocation_ids_in_group(group.id)) {
    const auto* c = store.allocation(id);
    if (!c) continue;
    auto& slot = shown[c->node_id];
    bool better = !slot || (is_live_copy(*c) && !is_live_copy(*slot)) ||
                  (is_live_copy(*c) == is_live_copy(*slot) && c->create_index > slot->create_index);
    if (better) slot = c;
  }
  for (const auto& [node, st] : group.system_nodes) shown.emplace(node, nullptr);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [node, c] : shown) {
    nlohmann::json j = {{"NodeID", node}, {"AllocID", c ? c->id : ""},
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

// Stopping a live plugin allocation (node or monolith) whose node still has volumes of that plugin
// claimed: their unmounts wait for a new instance. One warning per (plugin, node); nothing when
// another live allocation not being stopped runs the same plugin on that node.
std::vector<std::string> plugin_stop_warnings(const StateStore& store, const std::vector<const domain::Allocation*>& stopping) {
  std::set<std::string> stopping_ids;
  for (const auto* a : stopping) stopping_ids.insert(a->id);
  std::vector<std::string> out;
  for (const auto* a : stopping) {
    if (!a->task || !a->task->csi_plugin || a->node_id.empty() || domain::is_terminal(*a)) continue;
    const auto& plugin = *a->task->csi_plugin;
    if (plugin.type == domain::PluginType::controller) continue;
    bool other = false;
    for (const auto& id : store.live_allocation_ids_on(a->node_id)) {
      const auto* o = store.allocation(id);
      if (o && !stopping_ids.contains(id) && is_live_copy(*o) && o->task && o->task->csi_plugin &&
          o->task->csi_plugin->id == plugin.id)
        other = true;
    }
    if (other) continue;
    std::vector<std::string> names;
    for (const auto& [key, v] : store.volumes()) {
      if (v.plugin_id != plugin.id) continue;
      for (const auto& [alloc_id, c] : v.claims)
        if (c.node_id == a->node_id &&
            (c.state == domain::ClaimState::taken || c.state == domain::ClaimState::unpublishing)) {
          names.push_back(v.id);
          break;
        }
    }
    if (names.empty()) continue;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    out.push_back("plugin " + in_quotes(plugin.id) + " on node " + in_quotes(a->node_id) +
                  " still serves mounted volumes: " + list + "; their unmounts wait for a new instance");
  }
  return out;
}

bool current_is_group(const std::vector<const domain::Allocation*>& stopping) { return stopping.front()->system; }

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

namespace {

// The group and a copy on every eligible node where placement accepts it, in one commit. No
// eligible node is not an error: copies follow as nodes join (the system reconciler).
http::Response submit_system(Context& ctx, domain::Allocation group) {
  const auto now = domain::now();
  group.events = {{now, "Received", "system allocation: one copy per eligible node"}};
  Batch batch;
  nlohmann::json copies = nlohmann::json::array();
  const auto view = cluster_view(ctx.store);
  for (const auto& [node_id, node] : ctx.store.nodes()) {
    if (!system_eligible(group, node)) continue;
    auto copy = make_system_copy(group, node_id, domain::new_id(), now);
    auto placed = place(copy, view);
    if (!placed.node_id) {
      group.system_nodes[node_id].message = placed.message(copy);
      continue;
    }
    group.system_nodes[node_id].copy_created = now;
    copies.push_back({{"NodeID", node_id}, {"AllocID", copy.id}});
    batch.add_event({.topic = "Allocation", .type = "SystemCopyPlaced", .ns = copy.ns, .key = copy.id,
                     .message = "system allocation " + in_quotes(group.id) + ": copy " + in_quotes(copy.id) +
                                " placed on node " + node_id,
                     .details = {{"node_id", node_id}, {"system_id", group.id}}});
    batch.put(std::move(copy));
  }
  batch.add_event({.topic = "Allocation", .type = "AllocationSubmitted", .ns = group.ns, .key = group.id,
                   .message = "submitted system allocation " + in_quotes(group.name),
                   .details = {{"copies", std::to_string(copies.size())}}});
  std::string id = group.id;
  batch.put(std::move(group));
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("submit allocation", index.error());
  nlohmann::json out = {{"ID", id}, {"System", true}, {"Copies", copies}, {"Index", *index}};
  if (copies.empty()) out["Message"] = "no eligible node yet: a copy is placed on each node that joins and matches";
  auto res = json_ok(out);
  res.index = *index;
  return res;
}

}  // namespace

http::Response submit_allocation(Context& ctx, const http::Request& req) {
  nlohmann::json body;
  http::Response err;
  if (!parse_body(req, body, err)) return err;
  auto alloc = domain::allocation_request_from_api(body);
  if (!alloc) return bad_request(alloc.error());
  auto& a = *alloc;
  a.ns = request_namespace(req);
  std::string who = "allocation " + in_quotes(a.name);
  if (a.system && !a.node_id.empty())
    return bad_request(who + ": field \"NodeID\": a system allocation runs on every eligible node; use NodeSelector");
  if (!a.system && !a.node_selector.empty())
    return bad_request(who + ": field \"NodeSelector\": only system allocations (\"System\": true) select nodes");
  if (auto bad = check_node_selector(a.node_selector)) return bad_request(who + ": " + *bad);
  if (!a.node_id.empty() && !ctx.store.node(a.node_id))
    return bad_request("allocation " + in_quotes(a.name) + ": field \"NodeID\": node not found: " + a.node_id);
  std::vector<const domain::Allocation*> same_name;
  for (const auto& id : ctx.store.allocation_ids_named(a.ns, a.name)) same_name.push_back(ctx.store.allocation(id));
  a.index = next_alloc_index(same_name, a.name);
  if (auto bad = check_volume_requests(ctx.store, a)) return bad_request(*bad);
  a.id = domain::new_id();
  a.desired_status = domain::DesiredStatus::run;
  a.client_status = domain::ClientStatus::pending;
  if (a.system) return submit_system(ctx, std::move(a));
  const bool chosen = !a.node_id.empty();
  auto placed = place(a, cluster_view(ctx.store));
  if (!placed.node_id) return unplaced(placed, a);
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
  const auto now = domain::now();
  // What stops: the allocation, and for a group every live copy (one commit).
  std::vector<const domain::Allocation*> stopping{current};
  if (current->system)
    for (const auto& cid : ctx.store.allocation_ids_in_group(id))
      if (const auto* c = ctx.store.allocation(cid); c && is_live_copy(*c)) stopping.push_back(c);
  auto warnings = plugin_stop_warnings(ctx.store, stopping);
  Batch batch;
  domain::Allocation a = *current;
  a.desired_status = domain::DesiredStatus::stop;
  // Never placed: nothing runs and nothing is mounted, so it is done at once (a group runs nothing).
  bool unplaced = a.node_id.empty() && a.client_status == domain::ClientStatus::pending;
  if (unplaced) a.client_status = domain::ClientStatus::complete;
  a.events.push_back({now, "StopRequested",
                      a.system ? "stop requested: every copy stops"
                               : unplaced ? "stopped before placement" : "stop requested"});
  if (a.rollout && a.rollout->status == "running") {
    a.rollout->status = "failed";
    for (auto& n : a.rollout->nodes)
      if (n.state != "done") n.message = "rollout stopped: the allocation was stopped";
  }
  batch.add_event({.topic = "Allocation", .type = "AllocationStopRequested", .ns = a.ns, .key = id,
                   .message = "stop requested for allocation " + in_quotes(a.name),
                   .details = {{"node_id", a.node_id}}});
  for (std::size_t i = 1; i < stopping.size(); ++i)
    gc::stop_in_batch(batch, *stopping[i], "its system allocation " + in_quotes(id) + " was stopped", now);
  // A copy stopped on purpose stays stopped while its group runs (the reconciler skips its node).
  if (!a.system_id.empty())
    if (const auto* g = ctx.store.allocation(a.system_id); g && g->desired_status == domain::DesiredStatus::run) {
      domain::Allocation group = *g;
      auto& st = group.system_nodes[a.node_id];
      st.stopped = true;
      st.message = "copy " + in_quotes(id) + " was stopped on purpose; the node gets no copy while the group runs";
      batch.put(std::move(group));
    }
  batch.put(std::move(a));
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("stop allocation \"" + id + "\"", index.error());
  nlohmann::json out = {{"ID", id}, {"Index", *index}};
  if (current_is_group(stopping)) out["StoppedCopies"] = stopping.size() - 1;
  if (!warnings.empty()) out["Warnings"] = warnings;
  auto res = json_ok(out);
  res.index = *index;
  return res;
}

// PUT /v1/allocation/:id {"Task": {...}}: a rolling update of a plugin allocation. A group rolls
// node by node (the system reconciler); a single allocation gets its replacement on its node at
// once, beside it, and is stopped once the replacement's plugin instance is healthy.
http::Response update_allocation(Context& ctx, const http::Request& req) {
  std::string id;
  http::Response err;
  if (!path_id(req, "id", domain::IdKind::allocation, id, err)) return err;
  nlohmann::json body;
  if (!parse_body(req, body, err)) return err;
  const auto* current = allocation_in(ctx.store, req, id);
  if (!current) return not_found("allocation", id, request_namespace(req));
  std::string who = "allocation " + in_quotes(id);
  if (!body.is_object()) return bad_request("request: must be an object with a \"Task\"");
  for (const auto& [key, value] : body.items())
    if (key != "Task") return bad_request("request: field " + in_quotes(key) + ": unknown field (only \"Task\" updates in place)");
  if (!body.contains("Task")) return bad_request("request: field \"Task\": required");
  // The task is read by the allocation's own codec, so its errors name the field as a submit does.
  auto parsed = domain::allocation_request_from_api({{"Allocation", {{"Name", current->name}, {"Task", body["Task"]}}}});
  if (!parsed) return bad_request(parsed.error());
  auto task = std::move(parsed->task);
  if (!current->system_id.empty())
    return bad_request(who + " is a copy of system allocation " + in_quotes(current->system_id) +
                       ": update the group, its copies follow node by node");
  if (!current->task || !current->task->csi_plugin)
    return bad_request(who + ": only plugin allocations (a Task with CSIPlugin) update in place; stop it and submit a new one");
  if (!task->csi_plugin) return bad_request(who + ": field \"Task.CSIPlugin\": required (a plugin allocation stays a plugin)");
  if (task->csi_plugin->id != current->task->csi_plugin->id)
    return bad_request(who + ": field \"Task.CSIPlugin.ID\": must stay " + in_quotes(current->task->csi_plugin->id) +
                       " (volumes name the plugin id); submit a new allocation for another plugin");
  if (current->desired_status != domain::DesiredStatus::run) return http::error_response(409, who + " is stopped");
  if (current->rollout && current->rollout->status == "running")
    return http::error_response(409, who + ": a rolling update is in progress");
  const auto now = domain::now();
  domain::Allocation a = *current;
  domain::Rollout rollout;
  rollout.version = current->rollout ? current->rollout->version + 1 : 1;
  Batch batch;
  nlohmann::json out = {{"ID", id}};
  if (a.system) {
    // Every node with a live copy, in node id order (a map), the newest live copy on each.
    std::map<std::string, const domain::Allocation*> live;
    for (const auto& cid : ctx.store.allocation_ids_in_group(id)) {
      const auto* c = ctx.store.allocation(cid);
      if (!c || !is_live_copy(*c)) continue;
      auto& slot = live[c->node_id];
      if (!slot || c->create_index > slot->create_index) slot = c;
    }
    for (const auto& [node, c] : live) rollout.nodes.push_back({.node_id = node, .old_alloc_id = c->id});
    a.task = std::move(task);
  } else {
    // The replacement: the same allocation (name, node, volumes, index) with the new task.
    domain::Allocation fresh = a;
    fresh.id = domain::new_id();
    fresh.task = std::move(task);
    fresh.client_status = domain::ClientStatus::pending;
    fresh.rollout.reset();
    fresh.events = {{now, "Received", "rolling update of " + in_quotes(id) + ": beside it on node " + a.node_id}};
    auto placed = place(fresh, cluster_view(ctx.store));
    if (!placed.node_id) return unplaced(placed, fresh);
    rollout.nodes.push_back({.node_id = a.node_id, .state = "starting",
                             .message = "new allocation " + in_quotes(fresh.id) + " placed beside " + in_quotes(id),
                             .old_alloc_id = id, .new_alloc_id = fresh.id, .started = now});
    out["NewID"] = fresh.id;
    out["Message"] = "allocation " + in_quotes(fresh.id) + " replaces " + in_quotes(id) +
                     " once its plugin instance is healthy";
    batch.add_event({.topic = "Allocation", .type = "RolloutStarting", .ns = fresh.ns, .key = fresh.id,
                     .message = rollout.nodes.back().message, .details = {{"node_id", fresh.node_id}}});
    batch.put(std::move(fresh));
  }
  a.rollout = rollout;
  a.events.push_back({now, "UpdateRequested", "rolling update " + std::to_string(rollout.version) + " of plugin " +
                                                  in_quotes(a.task->csi_plugin->id)});
  batch.add_event({.topic = "Allocation", .type = "AllocationUpdateRequested", .ns = a.ns, .key = id,
                   .message = "rolling update of allocation " + in_quotes(a.name),
                   .details = {{"nodes", std::to_string(rollout.nodes.size())}}});
  out["Rollout"] = domain::to_api_json(a)["Rollout"];
  batch.put(std::move(a));
  auto index = ctx.store.commit(std::move(batch));
  if (!index) return write_failed("update allocation \"" + id + "\"", index.error());
  out["Index"] = *index;
  auto res = json_ok(out);
  res.index = *index;
  return res;
}

}  // namespace mooring::controlplane::api
