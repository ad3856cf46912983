// Allocations: the rolling update of a plugin allocation's task (PUT /v1/allocation/:id). A group
// rolls node by node (the system reconciler drives it); a single allocation gets its replacement
// on its node at once, beside it, and is stopped once the replacement's plugin instance is healthy.
#include <optional>

#include "services/controlplane/allocations/allocations.hpp"
#include "services/controlplane/allocations/placing.hpp"
#include "services/controlplane/scheduler/system_placement.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/ids.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::allocations {

using domain::in_quotes;

namespace {

// Only a running plugin allocation that is not a group's copy takes a new task of the same plugin.
std::optional<Failure> check_update(const domain::Allocation& current, const std::optional<domain::Task>& task) {
  std::string who = "allocation " + in_quotes(current.id);
  if (!current.system_id.empty())
    return volumes::invalid(who + " is a copy of system allocation " + in_quotes(current.system_id) +
                            ": update the group, its copies follow node by node");
  if (!current.task || !current.task->csi_plugin)
    return volumes::invalid(
        who + ": only plugin allocations (a Task with CSIPlugin) update in place; stop it and submit a new one");
  if (!task || !task->csi_plugin)
    return volumes::invalid(who + ": field \"Task.CSIPlugin\": required (a plugin allocation stays a plugin)");
  if (task->csi_plugin->id != current.task->csi_plugin->id)
    return volumes::invalid(who + ": field \"Task.CSIPlugin.ID\": must stay " +
                            in_quotes(current.task->csi_plugin->id) +
                            " (volumes name the plugin id); submit a new allocation for another plugin");
  if (current.desired_status != domain::DesiredStatus::run) return volumes::conflict(who + " is stopped");
  if (current.rollout && current.rollout->status == "running")
    return volumes::conflict(who + ": a rolling update is in progress");
  return std::nullopt;
}

// A group's rollout: every node with a live copy, in node id order (a map), the newest live copy on each.
void plan_group_rollout(const StateStore& store, const domain::Allocation& group, domain::Rollout& rollout) {
  std::map<std::string, const domain::Allocation*> live;
  for (const auto& cid : store.allocation_ids_in_group(group.id)) {
    const auto* c = store.allocation(cid);
    if (!c || !is_live_copy(*c)) continue;
    auto& slot = live[c->node_id];
    if (!slot || c->create_index > slot->create_index) slot = c;
  }
  for (const auto& [node, c] : live) rollout.nodes.push_back({.node_id = node, .old_alloc_id = c->id});
}

// A single allocation's replacement: the same allocation (name, node, volumes, index) with the
// new task, placed beside it and added to `batch`; its id.
Outcome<std::string> place_replacement(const StateStore& store, const domain::Allocation& a,
                                       std::optional<domain::Task> task, domain::Time now, domain::Rollout& rollout,
                                       Batch& batch) {
  domain::Allocation fresh = a;
  fresh.id = domain::new_id();
  fresh.task = std::move(task);
  fresh.client_status = domain::ClientStatus::pending;
  fresh.rollout.reset();
  fresh.events = {{now, "Received", "rolling update of " + in_quotes(a.id) + ": beside it on node " + a.node_id}};
  auto placed = place(fresh, cluster_view(store));
  if (!placed.node_id) return unplaced(placed, fresh);
  rollout.nodes.push_back({.node_id = a.node_id,
                           .state = "starting",
                           .message = "new allocation " + in_quotes(fresh.id) + " placed beside " + in_quotes(a.id),
                           .old_alloc_id = a.id,
                           .new_alloc_id = fresh.id,
                           .started = now});
  batch.add_event({.topic = "Allocation",
                   .type = "RolloutStarting",
                   .ns = fresh.ns,
                   .key = fresh.id,
                   .message = rollout.nodes.back().message,
                   .details = {{"node_id", fresh.node_id}}});
  std::string id = fresh.id;
  batch.put(std::move(fresh));
  return id;
}

}  // namespace

Outcome<Updated> update_task(StateStore& store, const domain::Allocation& current, std::optional<domain::Task> task) {
  if (auto bad = check_update(current, task)) return *bad;
  const auto now = domain::now();
  Updated out{.allocation = current};
  auto& a = out.allocation;
  domain::Rollout rollout;
  rollout.version = current.rollout ? current.rollout->version + 1 : 1;
  Batch batch;
  if (a.system) {
    plan_group_rollout(store, a, rollout);
    a.task = std::move(task);
  } else {
    auto fresh = place_replacement(store, a, std::move(task), now, rollout, batch);
    if (!fresh) return fresh.error();
    out.new_id = *fresh;
  }
  a.rollout = rollout;
  a.events.push_back(
      {now, "UpdateRequested",
       "rolling update " + std::to_string(rollout.version) + " of plugin " + in_quotes(a.task->csi_plugin->id)});
  batch.add_event({.topic = "Allocation",
                   .type = "AllocationUpdateRequested",
                   .ns = a.ns,
                   .key = a.id,
                   .message = "rolling update of allocation " + in_quotes(a.name),
                   .details = {{"nodes", std::to_string(rollout.nodes.size())}}});
  batch.put(a);
  auto index = store.commit(std::move(batch));
  if (!index) return volumes::write_failed("update allocation \"" + a.id + "\"", index.error());
  out.index = *index;
  return out;
}

}  // namespace mooring::controlplane::allocations
