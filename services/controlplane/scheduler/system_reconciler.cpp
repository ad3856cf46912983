#include "services/controlplane/scheduler/system_reconciler.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "services/controlplane/scheduler/placement.hpp"
#include "services/controlplane/scheduler/system_placement.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/sleep.hpp"
#include "shared/domain/ids.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::scheduler {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using domain::in_quotes;

namespace {

void earliest(domain::Time& next, domain::Time at) {
  if (!domain::is_set(next) || at < next) next = at;
}

void allocation_event(Batch& batch, const domain::Allocation& a, std::string type, std::string message,
                      std::map<std::string, std::string> details = {}) {
  details.emplace("node_id", a.node_id);
  if (!a.system_id.empty()) details.emplace("system_id", a.system_id);
  batch.add_event({.topic = "Allocation",
                   .type = std::move(type),
                   .ns = a.ns,
                   .key = a.id,
                   .message = std::move(message),
                   .details = std::move(details)});
}

// The group's copies by node, newest (highest create index) last.
std::map<std::string, std::vector<const domain::Allocation*>> copies_by_node(const StateStore& store,
                                                                             const std::string& group_id) {
  std::map<std::string, std::vector<const domain::Allocation*>> out;
  for (const auto& id : store.allocation_ids_in_group(group_id))
    if (const auto* c = store.allocation(id)) out[c->node_id].push_back(c);
  for (auto& [node, list] : out)
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->create_index < b->create_index; });
  return out;
}

const domain::Allocation* live_copy(const std::vector<const domain::Allocation*>& copies) {
  for (auto it = copies.rbegin(); it != copies.rend(); ++it)
    if (is_live_copy(**it)) return *it;
  return nullptr;
}

}  // namespace

void stop_in_batch(Batch& batch, const domain::Allocation& alloc, const std::string& reason, domain::Time now) {
  domain::Allocation a = alloc;
  a.desired_status = domain::DesiredStatus::stop;
  bool unplaced = a.node_id.empty() && a.client_status == domain::ClientStatus::pending;
  if (unplaced) a.client_status = domain::ClientStatus::complete;
  a.events.push_back({now, "StopRequested", reason});
  allocation_event(batch, a, "AllocationStopRequested", "allocation " + in_quotes(a.id) + ": " + reason);
  batch.put(std::move(a));
}

std::chrono::milliseconds until_deadline(domain::Time next, domain::Time now, std::chrono::milliseconds max_wait) {
  if (!domain::is_set(next)) return max_wait;
  return std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(next - now) + 5ms,
                    std::chrono::milliseconds(5), max_wait);
}

bool plugin_instance_healthy(const StateStore& store, const std::string& plugin_id, const std::string& node_id,
                             const std::string& alloc_id) {
  const auto* p = store.plugin(plugin_id);
  if (!p) return false;
  for (const auto* m : {&p->nodes, &p->controllers}) {
    auto it = m->find(node_id);
    if (it != m->end() && it->second.healthy && it->second.alloc_id == alloc_id) return true;
  }
  return false;
}

namespace {

// One commit's step of a rolling update, one function per node state.
struct RolloutStep {
  const StateStore& store;
  domain::Allocation& holder;
  domain::Time now;
  const SystemOptions& options;
  Batch& batch;
  domain::Time& next;

  void fail(domain::RolloutNode& n, std::string message) {
    auto& rollout = *holder.rollout;
    n.state = "failed";
    n.message = std::move(message);
    rollout.status = "failed";
    for (auto& other : rollout.nodes)
      if (other.state == "pending") other.message = "not rolled: the rollout stopped at node " + n.node_id;
    // The group goes on placing the task that serves: the old copy's.
    if (holder.system)
      if (const auto* old = store.allocation(n.old_alloc_id); old && old->task) holder.task = old->task;
    allocation_event(
        batch, holder, "RolloutFailed",
        "rolling update of allocation " + in_quotes(holder.id) + " failed on node " + n.node_id + ": " + n.message);
  }

  // A pending node: a new copy placed beside the old one. nullopt: nothing to replace, go on to
  // the next node in this commit; otherwise whether the batch changed.
  std::optional<bool> start(domain::RolloutNode& n) {
    const auto* old = store.allocation(n.old_alloc_id);
    if (!old || !is_live_copy(*old)) {
      n.state = "done";
      n.message = "no running copy to replace: the node's next copy runs the new task";
      return std::nullopt;
    }
    const auto* node = store.node(n.node_id);
    if (!node || node->status != domain::NodeStatus::ready) {
      std::string message = "waiting for node " + in_quotes(n.node_id) + " to be ready";
      if (n.message == message) return false;
      n.message = std::move(message);
      return true;
    }
    auto copy = make_system_copy(holder, n.node_id, domain::new_id(), now);
    copy.system_id = holder.system ? holder.id : "";
    copy.events.back().message = "rolling update of " + in_quotes(holder.id) + ": beside " + in_quotes(old->id);
    auto placed = place(copy, cluster_view(store));
    if (!placed.node_id) {
      fail(n, placed.message(copy));
      return true;
    }
    n.state = "starting";
    n.new_alloc_id = copy.id;
    n.started = now;
    n.message = "new copy " + in_quotes(copy.id) + " placed beside " + in_quotes(old->id);
    if (holder.system) holder.system_nodes[n.node_id].copy_created = now;
    allocation_event(batch, copy, "RolloutStarting", n.message);
    batch.put(std::move(copy));
    return true;
  }

  // A starting node: the new copy's plugin healthy in time, or the rollout fails.
  bool watch_start(domain::RolloutNode& n) {
    const std::string plugin_id = holder.task && holder.task->csi_plugin ? holder.task->csi_plugin->id : "";
    const auto* fresh = store.allocation(n.new_alloc_id);
    const auto timeout =
        (holder.task && holder.task->csi_plugin ? holder.task->csi_plugin->health_timeout : domain::Duration(30s)) +
        options.health_grace;
    if (!fresh || domain::is_terminal(*fresh) || fresh->desired_status != domain::DesiredStatus::run) {
      fail(n, "new copy " + in_quotes(n.new_alloc_id) + " ended (" +
                  (fresh ? std::string(domain::to_string(fresh->client_status)) : std::string("gone")) +
                  ") before its plugin became healthy; the old copy keeps serving");
      if (fresh && !domain::is_terminal(*fresh) && fresh->desired_status == domain::DesiredStatus::run)
        stop_in_batch(batch, *fresh, "rolling update failed", now);
      return true;
    }
    if (fresh->client_status == domain::ClientStatus::running &&
        plugin_instance_healthy(store, plugin_id, n.node_id, fresh->id)) {
      n.state = "healthy";
      n.message = "plugin " + in_quotes(plugin_id) + " on node " + in_quotes(n.node_id) + " is served by " +
                  in_quotes(fresh->id);
      allocation_event(batch, *fresh, "RolloutHealthy", n.message);
      return true;
    }
    if (now >= n.started + timeout) {
      fail(n, "new copy " + in_quotes(fresh->id) + " was not running with a healthy plugin instance within " +
                  domain::format_duration(timeout) + " (HealthTimeout + " +
                  domain::format_duration(options.health_grace) + "); the old copy keeps serving");
      stop_in_batch(batch, *fresh, "rolling update failed: not healthy in time", now);
      return true;
    }
    earliest(next, n.started + timeout);
    return false;
  }

  // A healthy node: the old copy stopped (the holder itself when it was the old copy).
  bool retire_old(domain::RolloutNode& n) {
    n.state = "done";
    n.message = "old copy " + in_quotes(n.old_alloc_id) + " stopped; " + in_quotes(n.new_alloc_id) + " serves";
    std::string reason = "replaced by " + in_quotes(n.new_alloc_id) + " (rolling update)";
    if (n.old_alloc_id == holder.id) {
      holder.desired_status = domain::DesiredStatus::stop;
      holder.events.push_back({now, "StopRequested", reason});
      allocation_event(batch, holder, "AllocationStopRequested", "allocation " + in_quotes(holder.id) + ": " + reason);
    } else if (const auto* old = store.allocation(n.old_alloc_id); old && is_live_copy(*old)) {
      stop_in_batch(batch, *old, reason, now);
    }
    return true;
  }
};

}  // namespace

bool step_rollout(const StateStore& store, domain::Allocation& holder, domain::Time now, const SystemOptions& options,
                  Batch& batch, domain::Time& next) {
  if (!holder.rollout || holder.rollout->status != "running") return false;
  RolloutStep step{store, holder, now, options, batch, next};
  for (auto& n : holder.rollout->nodes) {
    if (n.state == "done") continue;
    if (n.state == "failed") return false;
    if (n.state == "pending") {
      if (auto wrote = step.start(n)) return *wrote;
      continue;
    }
    if (n.state == "starting") return step.watch_start(n);
    if (n.state == "healthy") return step.retire_old(n);
  }
  holder.rollout->status = "done";
  allocation_event(batch, holder, "RolloutDone", "rolling update of allocation " + in_quotes(holder.id) + " done");
  return true;
}

bool reconcile_group(const StateStore& store, domain::Allocation& group, domain::Time now, const SystemOptions& options,
                     Batch& batch, domain::Time& next) {
  if (!group.system || group.desired_status != domain::DesiredStatus::run) return false;
  bool wrote = step_rollout(store, group, now, options, batch, next);
  const auto copies = copies_by_node(store, group.id);
  static const std::vector<const domain::Allocation*> none;
  for (const auto& [node_id, node] : store.nodes()) {
    if (!system_eligible(group, node)) continue;
    auto found = copies.find(node_id);
    const auto& on_node = found == copies.end() ? none : found->second;
    if (live_copy(on_node)) continue;
    // A copy placed in this same step (the rollout's) is not in the store yet.
    if (group.rollout && group.rollout->status == "running") {
      auto in_rollout = std::find_if(group.rollout->nodes.begin(), group.rollout->nodes.end(),
                                     [&](const auto& n) { return n.node_id == node_id && n.state == "starting"; });
      if (in_rollout != group.rollout->nodes.end()) continue;
    }
    auto st_it = group.system_nodes.find(node_id);
    domain::SystemNodeState st = st_it == group.system_nodes.end() ? domain::SystemNodeState{} : st_it->second;
    const domain::SystemNodeState before = st;
    if (st.stopped) continue;
    if (!on_node.empty() && domain::is_set(st.copy_created)) {
      // Its copy ended while the group runs: replace it after the node's backoff.
      if (now - st.copy_created >= options.reset_after) st.backoff = domain::Duration{0};
      st.backoff = st.backoff.count() == 0 ? options.restart_initial : std::min(st.backoff * 2, options.restart_max);
      st.next_restart = now + st.backoff;
      st.copy_created = domain::Time{};
      st.message = "copy " + in_quotes(on_node.back()->id) + " ended (" +
                   std::string(domain::to_string(on_node.back()->client_status)) + "); replaced at " +
                   domain::format_time(st.next_restart);
    }
    if (domain::is_set(st.next_restart) && now < st.next_restart) {
      earliest(next, st.next_restart);
    } else {
      auto copy = make_system_copy(group, node_id, domain::new_id(), now);
      auto placed = place(copy, cluster_view(store));
      if (!placed.node_id) {
        st.message = placed.message(copy);
      } else {
        if (domain::is_set(st.next_restart)) {
          ++st.restarts;
          copy.events.back().message += " (restart " + std::to_string(st.restarts) + ")";
        }
        st.next_restart = domain::Time{};
        st.copy_created = now;
        st.message.clear();
        allocation_event(
            batch, copy, "SystemCopyPlaced",
            "system allocation " + in_quotes(group.id) + ": copy " + in_quotes(copy.id) + " placed on node " + node_id);
        batch.put(std::move(copy));
        wrote = true;
      }
    }
    if (!(st == before)) {
      group.system_nodes[node_id] = st;
      wrote = true;
    }
  }
  return wrote;
}

SystemReconciler::SystemReconciler(asio::any_io_executor executor, StateStore& store, ChangeFeed& feed,
                                   SystemOptions options)
    : store_(store),
      options_(options),
      changes_(feed.subscribe(Table::allocations)),
      wake_(executor),
      tasks_(executor, "system") {}

SystemReconciler::~SystemReconciler() = default;

void SystemReconciler::follow(const std::string& alloc_id) {
  const auto* a = store_.allocation(alloc_id);
  if (!a) return;
  if (!a->system_id.empty()) return follow(a->system_id);  // a copy changed: look at its group
  if ((a->system && a->desired_status == domain::DesiredStatus::run) || (a->rollout && a->rollout->status == "running"))
    followed_.insert(alloc_id);
}

void SystemReconciler::start() {
  for (const auto& [id, a] : store_.allocations()) follow(id);
  changes_->take();  // the scan covered everything written so far
  if (!followed_.empty()) log_.info("resuming system allocations and rolling updates", {{"count", followed_.size()}});
  tasks_.spawn("system-reconcile", [this] { return loop(); });
  tasks_.spawn("system-alloc-watch", [this] { return allocation_watch(); });
  tasks_.spawn("system-node-watch", [this] { return table_watch(static_cast<int>(Table::nodes)); });
  tasks_.spawn("system-plugin-watch", [this] { return table_watch(static_cast<int>(Table::plugins)); });
}

asio::awaitable<void> SystemReconciler::stop() {
  stopping_ = true;
  tasks_.cancel();
  co_await tasks_.join();
}

bool SystemReconciler::reconcile_one(const std::string& id, domain::Time now, domain::Time& next) {
  const auto* current = store_.allocation(id);
  if (!current) return false;
  domain::Allocation a = *current;
  Batch batch;
  bool wrote = a.system ? reconcile_group(store_, a, now, options_, batch, next)
                        : step_rollout(store_, a, now, options_, batch, next);
  if (wrote) {
    batch.put(a);
    if (auto r = store_.commit(std::move(batch)); !r) {
      log_.error("cannot write a system reconcile step; retrying", {{"alloc_id", id}, {"error", r.error()}});
      earliest(next, now + 1s);
      return true;
    }
  }
  const bool group = a.system && a.desired_status == domain::DesiredStatus::run;
  return group || (a.rollout && a.rollout->status == "running");
}

domain::Time SystemReconciler::reconcile(domain::Time now) {
  domain::Time next{};
  for (const auto& id : changes_->take()) follow(id);
  for (const auto& id : std::set<std::string>(followed_)) {
    // A step wakes the next one at once (its own commit changes allocations): a rollout that
    // passes a node in one step goes on on the next pass, not after a timer.
    if (!reconcile_one(id, now, next)) followed_.erase(id);
  }
  return next;
}

asio::awaitable<void> SystemReconciler::loop() {
  while (!stopping_) {
    auto generation = wake_.generation();
    auto now = domain::now();
    const auto wait = until_deadline(reconcile(now), now, options_.max_wait);
    if (co_await async::sleep_for(wait, &wake_, generation) == async::SleepEnd::cancelled) break;
  }
}

asio::awaitable<void> SystemReconciler::allocation_watch() {
  std::uint64_t seen = store_.table_index(Table::allocations);
  while (!stopping_) {
    std::uint64_t index = co_await store_.wait_for_change(Table::allocations, seen, options_.max_wait);
    if (!changes_->empty()) wake_.notify();
    if (index <= seen) co_await async::sleep_for(50ms);  // timeout, or waiters released at shutdown
    seen = std::max(seen, index);
  }
}

asio::awaitable<void> SystemReconciler::table_watch(int table_number) {
  const auto table = static_cast<Table>(table_number);
  std::uint64_t seen = store_.table_index(table);
  while (!stopping_) {
    std::uint64_t index = co_await store_.wait_for_change(table, seen, options_.max_wait);
    if (index > seen && !followed_.empty()) wake_.notify();
    if (index <= seen) co_await async::sleep_for(50ms);
    seen = std::max(seen, index);
  }
}

}  // namespace mooring::controlplane::scheduler
