#include "services/controlplane/scheduler/drain_rules.hpp"

#include "shared/domain/text.hpp"

namespace mooring::controlplane::scheduler {

using domain::in_quotes;

namespace {

bool stopping(const domain::Allocation& a) { return a.desired_status == domain::DesiredStatus::stop; }

// What is left for the drain to stop, by kind.
struct Kinds {
  std::vector<const domain::Allocation*> workloads;  // not system copies
  std::vector<const domain::Allocation*> system_workloads;
  std::vector<const domain::Allocation*> plugins;
  int workloads_left = 0;  // workloads of either kind still running or stopping
};

Kinds sort_out(const DrainInput& in, DrainStep& out) {
  Kinds k;
  for (const auto* a : in.allocations) {
    if (domain::is_terminal(*a)) continue;
    const bool copy = !a->system_id.empty();
    if (copy && in.strategy.ignore_system_jobs) continue;  // kept on the node
    ++out.left;
    const bool plugin = !served_plugin(*a).empty();
    if (!plugin) ++k.workloads_left;
    if (stopping(*a)) continue;
    if (plugin)
      k.plugins.push_back(a);
    else if (copy)
      k.system_workloads.push_back(a);
    else
      k.workloads.push_back(a);
  }
  return k;
}

void note(DrainStep& out, const std::string& what) {
  if (out.waiting.empty()) out.waiting = what;
}

}  // namespace

std::string served_plugin(const domain::Allocation& alloc) {
  return alloc.task && alloc.task->csi_plugin ? alloc.task->csi_plugin->id : std::string{};
}

DrainStep plan_drain_step(const DrainInput& in) {
  DrainStep out;
  const bool past = in.now >= in.strategy.force_deadline;
  Kinds k = sort_out(in, out);
  for (const auto* a : k.workloads) {
    if (a->migrate) {
      out.decisions.push_back({a->id, DrainAction::migrate, "its node is draining: migrated"});
    } else if (past) {
      out.decisions.push_back({a->id, DrainAction::stop, "its node is draining and the drain's deadline passed"});
    } else {
      note(out, "allocation " + in_quotes(a->id) + " runs until the deadline " +
                    domain::format_time(in.strategy.force_deadline));
    }
  }
  // System copies go once the other workloads are gone (stopping ones count as still there).
  const int others_left = k.workloads_left - static_cast<int>(k.system_workloads.size());
  for (const auto* a : k.system_workloads) {
    if (others_left == 0) {
      out.decisions.push_back({a->id, DrainAction::stop, "its node is draining: system copies go after the rest"});
    } else {
      note(out, "system copy " + in_quotes(a->id) + " waits for the node's other allocations to stop");
    }
  }
  for (const auto* a : k.plugins) {
    const std::string plugin = served_plugin(*a);
    auto claims = in.claims_by_plugin.find(plugin);
    const int held = claims == in.claims_by_plugin.end() ? 0 : claims->second;
    if (k.workloads_left > 0) {
      note(out, "plugin allocation " + in_quotes(a->id) + " waits for the node's workloads to stop");
    } else if (held > 0) {
      note(out, "plugin allocation " + in_quotes(a->id) + " waits for " + std::to_string(held) +
                    " claim(s) of plugin " + in_quotes(plugin) + " on the node to be released");
    } else {
      out.decisions.push_back(
          {a->id, DrainAction::stop, "its node is draining: the plugin's volumes on the node are released"});
    }
  }
  if (out.left > 0 && out.waiting.empty() && out.decisions.empty())
    out.waiting = std::to_string(out.left) + " allocation(s) stopping";
  out.complete = out.left == 0;
  return out;
}

domain::Allocation migration_replacement(const domain::Allocation& old, std::string id, domain::Time now) {
  domain::Allocation r;
  r.ns = old.ns;
  r.id = std::move(id);
  r.name = old.name;
  r.volumes = old.volumes;
  r.task = old.task;
  r.stop_after_client_disconnect = old.stop_after_client_disconnect;
  r.index = old.index;
  r.migrate = true;
  r.migrated_from = old.id;
  r.events = {
      {now, "Received",
       "replacement of allocation " + in_quotes(old.id) + ", migrated off draining node " + in_quotes(old.node_id)}};
  return r;
}

}  // namespace mooring::controlplane::scheduler
