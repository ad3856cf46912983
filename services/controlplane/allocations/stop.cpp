// Allocations: a stop, and what a group shows of its copies. Stopping a group stops every live
// copy in the same commit; a copy stopped on purpose stays stopped while its group runs.
#include <set>

#include "services/controlplane/allocations/allocations.hpp"
#include "services/controlplane/scheduler/system_placement.hpp"
#include "services/controlplane/scheduler/system_reconciler.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::allocations {

using domain::in_quotes;

namespace {

// The volumes of `plugin_id` claimed on `node_id` and not yet unmounted there.
std::vector<std::string> mounted_volumes(const StateStore& store, const std::string& plugin_id,
                                         const std::string& node_id) {
  std::vector<std::string> names;
  for (const auto& [key, v] : store.volumes()) {
    if (v.plugin_id != plugin_id) continue;
    for (const auto& [alloc_id, c] : v.claims)
      if (c.node_id == node_id &&
          (c.state == domain::ClaimState::taken || c.state == domain::ClaimState::unpublishing)) {
        names.push_back(v.id);
        break;
      }
  }
  return names;
}

// Stopping a live plugin allocation (node or monolith) whose node still has volumes of that plugin
// claimed: their unmounts wait for a new instance. One warning per (plugin, node); nothing when
// another live allocation not being stopped runs the same plugin on that node.
std::vector<std::string> plugin_stop_warnings(const StateStore& store,
                                              const std::vector<const domain::Allocation*>& stopping) {
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
    auto names = mounted_volumes(store, plugin.id, a->node_id);
    if (names.empty()) continue;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    out.push_back("plugin " + in_quotes(plugin.id) + " on node " + in_quotes(a->node_id) +
                  " still serves mounted volumes: " + list + "; their unmounts wait for a new instance");
  }
  return out;
}

// `current` with its stop requested (and a running rollout of it failed).
domain::Allocation stop_requested(const domain::Allocation& current, domain::Time now) {
  domain::Allocation a = current;
  a.desired_status = domain::DesiredStatus::stop;
  // Never placed: nothing runs and nothing is mounted, so it is done at once (a group runs nothing).
  bool unplaced = a.node_id.empty() && a.client_status == domain::ClientStatus::pending;
  if (unplaced) a.client_status = domain::ClientStatus::complete;
  a.events.push_back({now, "StopRequested",
                      a.system   ? "stop requested: every copy stops"
                      : unplaced ? "stopped before placement"
                                 : "stop requested"});
  if (a.rollout && a.rollout->status == "running") {
    a.rollout->status = "failed";
    for (auto& n : a.rollout->nodes)
      if (n.state != "done") n.message = "rollout stopped: the allocation was stopped";
  }
  return a;
}

// A copy stopped on purpose stays stopped while its group runs (the reconciler skips its node).
void keep_copy_stopped(const StateStore& store, const domain::Allocation& copy, Batch& batch) {
  if (copy.system_id.empty()) return;
  const auto* g = store.allocation(copy.system_id);
  if (!g || g->desired_status != domain::DesiredStatus::run) return;
  domain::Allocation group = *g;
  auto& st = group.system_nodes[copy.node_id];
  st.stopped = true;
  st.message = "copy " + in_quotes(copy.id) + " was stopped on purpose; the node gets no copy while the group runs";
  batch.put(std::move(group));
}

}  // namespace

Outcome<Stopped> stop(StateStore& store, const domain::Allocation& current) {
  if (current.desired_status == domain::DesiredStatus::stop) return Stopped{.index = current.modify_index};
  const auto now = domain::now();
  const std::string id = current.id;  // current lives in the store, which the commit changes
  // What stops: the allocation, and for a group every live copy (one commit).
  std::vector<const domain::Allocation*> stopping{&current};
  if (current.system)
    for (const auto& cid : store.allocation_ids_in_group(id))
      if (const auto* c = store.allocation(cid); c && is_live_copy(*c)) stopping.push_back(c);
  Stopped out{.group = current.system,
              .stopped_copies = stopping.size() - 1,
              .warnings = plugin_stop_warnings(store, stopping)};
  Batch batch;
  batch.add_event({.topic = "Allocation",
                   .type = "AllocationStopRequested",
                   .ns = current.ns,
                   .key = id,
                   .message = "stop requested for allocation " + in_quotes(current.name),
                   .details = {{"node_id", current.node_id}}});
  for (std::size_t i = 1; i < stopping.size(); ++i)
    scheduler::stop_in_batch(batch, *stopping[i], "its system allocation " + in_quotes(id) + " was stopped", now);
  keep_copy_stopped(store, current, batch);
  batch.put(stop_requested(current, now));
  auto index = store.commit(std::move(batch));
  if (!index) return volumes::write_failed("stop allocation \"" + id + "\"", index.error());
  out.index = *index;
  return out;
}

std::map<std::string, const domain::Allocation*> shown_copies(const StateStore& store,
                                                              const domain::Allocation& group) {
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
  return shown;
}

}  // namespace mooring::controlplane::allocations
