// Allocations: a submit. Checked against the node and volumes it names, then placed on a node
// (or checked against the node it names); a system allocation is committed with a copy on every
// eligible node where placement accepts one, and the system reconciler places the rest later.
#include <optional>

#include "services/controlplane/allocations/allocations.hpp"
#include "services/controlplane/allocations/placing.hpp"
#include "services/controlplane/namespaces/namespace_rules.hpp"
#include "services/controlplane/scheduler/system_placement.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/ids.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::allocations {

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

// Where it may run: a system allocation selects nodes, any other names at most one that exists.
std::optional<std::string> check_nodes(const StateStore& store, const domain::Allocation& a) {
  std::string who = "allocation " + in_quotes(a.name);
  if (a.system && !a.node_id.empty())
    return who + ": field \"NodeID\": a system allocation runs on every eligible node; use NodeSelector";
  if (!a.system && !a.node_selector.empty())
    return who + ": field \"NodeSelector\": only system allocations (\"System\": true) select nodes";
  if (auto bad = check_node_selector(a.node_selector)) return who + ": " + *bad;
  if (!a.node_id.empty() && !store.node(a.node_id)) return who + ": field \"NodeID\": node not found: " + a.node_id;
  return std::nullopt;
}

// The group and a copy on every eligible node where placement accepts it, in one commit. No
// eligible node is not an error: copies follow as nodes join (the system reconciler).
Outcome<Submitted> submit_system(StateStore& store, domain::Allocation group) {
  const auto now = domain::now();
  group.events = {{now, "Received", "system allocation: one copy per eligible node"}};
  Submitted out{.id = group.id, .system = true};
  Batch batch;
  const auto view = cluster_view(store);
  for (const auto& [node_id, node] : store.nodes()) {
    if (!system_eligible(group, node)) continue;
    auto copy = make_system_copy(group, node_id, domain::new_id(), now);
    auto placed = place(copy, view);
    if (!placed.node_id) {
      group.system_nodes[node_id].message = placed.message(copy);
      continue;
    }
    group.system_nodes[node_id].copy_created = now;
    out.copies.push_back({node_id, copy.id});
    batch.add_event({.topic = "Allocation",
                     .type = "SystemCopyPlaced",
                     .ns = copy.ns,
                     .key = copy.id,
                     .message = "system allocation " + in_quotes(group.id) + ": copy " + in_quotes(copy.id) +
                                " placed on node " + node_id,
                     .details = {{"node_id", node_id}, {"system_id", group.id}}});
    batch.put(std::move(copy));
  }
  // The copies placed now count against the quota; those the reconciler places later do not.
  const namespaces::Delta adds{.running_allocations = static_cast<std::int64_t>(out.copies.size())};
  if (auto over = namespaces::over_quota(store, group.ns, adds)) return volumes::conflict(*over);
  batch.add_event({.topic = "Allocation",
                   .type = "AllocationSubmitted",
                   .ns = group.ns,
                   .key = group.id,
                   .message = "submitted system allocation " + in_quotes(group.name),
                   .details = {{"copies", std::to_string(out.copies.size())}}});
  batch.put(std::move(group));
  auto index = store.commit(std::move(batch));
  if (!index) return volumes::write_failed("submit allocation", index.error());
  out.index = *index;
  return out;
}

Outcome<Submitted> submit_one(StateStore& store, domain::Allocation a) {
  const bool chosen = !a.node_id.empty();
  auto placed = place(a, cluster_view(store));
  if (!placed.node_id) return unplaced(placed, a);
  if (auto over = namespaces::over_quota(store, a.ns, {.running_allocations = 1})) return volumes::conflict(*over);
  a.node_id = *placed.node_id;
  a.events = {{domain::now(), "Received", (chosen ? "assigned to node " : "placed on node ") + a.node_id}};
  Batch batch;
  batch.add_event({.topic = "Allocation",
                   .type = "AllocationSubmitted",
                   .ns = a.ns,
                   .key = a.id,
                   .message = "submitted allocation " + in_quotes(a.name),
                   .details = {{"node_id", a.node_id}}});
  Submitted out{.id = a.id, .node_id = a.node_id};
  batch.put(std::move(a));
  auto index = store.commit(std::move(batch));
  if (!index) return volumes::write_failed("submit allocation", index.error());
  out.index = *index;
  return out;
}

}  // namespace

Outcome<Submitted> submit(StateStore& store, domain::Allocation a) {
  if (auto bad = check_nodes(store, a)) return volumes::invalid(*bad);
  std::vector<const domain::Allocation*> same_name;
  for (const auto& id : store.allocation_ids_named(a.ns, a.name)) same_name.push_back(store.allocation(id));
  a.index = next_alloc_index(same_name, a.name);
  if (auto bad = check_volume_requests(store, a)) return volumes::invalid(*bad);
  a.id = domain::new_id();
  a.desired_status = domain::DesiredStatus::run;
  a.client_status = domain::ClientStatus::pending;
  return a.system ? submit_system(store, std::move(a)) : submit_one(store, std::move(a));
}

}  // namespace mooring::controlplane::allocations
