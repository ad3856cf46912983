#include "services/controlplane/scheduler/drainer.hpp"

#include <algorithm>
#include <set>

#include "services/controlplane/scheduler/drain_rules.hpp"
#include "services/controlplane/scheduler/placement.hpp"
#include "services/controlplane/scheduler/system_reconciler.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/sleep.hpp"
#include "shared/domain/ids.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::scheduler {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using domain::in_quotes;

namespace {

DrainInput gather(const StateStore& store, const domain::Node& node, domain::Time now) {
  DrainInput in{.strategy = *node.drain, .now = now, .allocations = {}, .claims_by_plugin = {}};
  for (const auto& id : store.live_allocation_ids_on(node.id))
    if (const auto* a = store.allocation(id)) in.allocations.push_back(a);
  for (const auto& [key, v] : store.volumes())
    for (const auto& [alloc_id, claim] : v.claims)
      if (claim.node_id == node.id) ++in.claims_by_plugin[v.plugin_id];
  return in;
}

// Places the replacement of `old` elsewhere and stops `old`, in one commit; or says why not.
// Past the deadline an allocation no node takes is stopped without one.
std::string migrate(const StateStore& store, const domain::Allocation& old, bool past, domain::Time now, Batch& batch) {
  auto replacement = migration_replacement(old, domain::new_id(), now);
  const std::set<std::string> leaving{old.id};
  auto view = cluster_view(store);
  view.stopping = &leaving;
  auto placed = place(replacement, view);
  if (!placed.node_id) {
    const std::string why = placed.message(replacement);
    if (!past) return "allocation " + in_quotes(old.id) + " cannot migrate yet: " + why;
    stop_in_batch(batch, old, "its node is draining and the deadline passed; no node takes its replacement: " + why,
                  now);
    return {};
  }
  replacement.node_id = *placed.node_id;
  replacement.events.back().message += "; placed on node " + in_quotes(replacement.node_id);
  stop_in_batch(batch, old,
                "its node is draining: migrated to allocation " + in_quotes(replacement.id) + " on node " +
                    in_quotes(replacement.node_id),
                now);
  batch.add_event(
      {.topic = "Allocation",
       .type = "AllocationMigrated",
       .ns = replacement.ns,
       .key = replacement.id,
       .message = "allocation " + in_quotes(old.id) + " migrated off draining node " + in_quotes(old.node_id) +
                  " to node " + in_quotes(replacement.node_id),
       .details = {{"node_id", replacement.node_id}, {"from_node_id", old.node_id}, {"migrated_from", old.id}}});
  batch.put(std::move(replacement));
  return {};
}

// The node's LastDrain after this step, with its events; the drain ends when nothing is left.
bool record_progress(const domain::Node& node, const DrainStep& step, const std::string& waiting, domain::Time now,
                     Batch& batch) {
  domain::Node n = node;
  const auto before = n.last_drain.value_or(domain::DrainStatus{});
  auto st = before;
  st.status = "draining";
  st.started = node.drain->started;
  st.allocations_left = step.left;
  st.message = waiting;
  if (step.complete) {
    st.status = "complete";
    st.message = "drain complete: the node stays ineligible until marked eligible";
    n.drain.reset();
  }
  st.updated = before.updated;
  if (st == before && !step.complete) return false;
  st.updated = now;
  n.last_drain = st;
  const std::map<std::string, std::string> details{{"allocations_left", std::to_string(st.allocations_left)}};
  if (step.complete)
    batch.add_event({.topic = "Node",
                     .type = "NodeDrainComplete",
                     .key = node.id,
                     .message = "drain of node " + in_quotes(node.id) + " complete",
                     .details = details});
  else if (st.allocations_left != before.allocations_left || st.status != before.status)
    batch.add_event({.topic = "Node",
                     .type = "NodeDrainProgress",
                     .key = node.id,
                     .message = "drain of node " + in_quotes(node.id) + ": " + std::to_string(st.allocations_left) +
                                " allocation(s) left" + (waiting.empty() ? "" : "; " + waiting),
                     .details = details});
  batch.put(std::move(n));
  return true;
}

}  // namespace

bool drain_step(const StateStore& store, const domain::Node& node, domain::Time now, Batch& batch, domain::Time& next) {
  if (!node.drain) return false;
  const bool past = now >= node.drain->force_deadline;
  if (!past && (!domain::is_set(next) || node.drain->force_deadline < next)) next = node.drain->force_deadline;
  const auto step = plan_drain_step(gather(store, node, now));
  std::string waiting = step.waiting;
  bool wrote = false, migrated = false;
  for (const auto& d : step.decisions) {
    const auto* a = store.allocation(d.alloc_id);
    if (d.action == DrainAction::stop) {
      stop_in_batch(batch, *a, d.reason, now);
      wrote = true;
      continue;
    }
    if (migrated) continue;  // one per step: the next placement sees this one
    if (auto why = migrate(store, *a, past, now, batch); !why.empty()) {
      if (waiting.empty()) waiting = why;
      continue;
    }
    migrated = wrote = true;
  }
  if (waiting.empty() && !step.decisions.empty()) waiting = "stopping the node's allocations";
  return record_progress(node, step, waiting, now, batch) || wrote;
}

Drainer::Drainer(asio::any_io_executor executor, StateStore& store, DrainerOptions options)
    : store_(store), options_(options), wake_(executor), tasks_(executor, "drain") {}

Drainer::~Drainer() = default;

void Drainer::start() {
  tasks_.spawn("drain", [this] { return loop(); });
  for (auto table : {Table::nodes, Table::allocations, Table::volumes})
    tasks_.spawn("drain-watch", [this, table] { return table_watch(static_cast<int>(table)); });
}

asio::awaitable<void> Drainer::stop() {
  stopping_ = true;
  tasks_.cancel();
  co_await tasks_.join();
}

domain::Time Drainer::pass(domain::Time now) {
  domain::Time next{};
  draining_ = false;
  for (const auto& [id, node] : store_.nodes()) {
    if (!node.drain) continue;
    draining_ = true;
    Batch batch;
    if (!drain_step(store_, node, now, batch, next)) continue;
    if (auto r = store_.commit(std::move(batch)); !r) {
      log_.error("cannot write a drain step; retrying", {{"node_id", id}, {"error", r.error()}});
      if (!domain::is_set(next) || now + 1s < next) next = now + 1s;
    }
  }
  return next;
}

asio::awaitable<void> Drainer::loop() {
  while (!stopping_) {
    auto generation = wake_.generation();
    auto now = domain::now();
    const auto wait = until_deadline(pass(now), now, options_.max_wait);
    if (co_await async::sleep_for(wait, &wake_, generation) == async::SleepEnd::cancelled) break;
  }
}

// Nodes always wake it (a drain may have started); allocations and volumes only while one runs.
asio::awaitable<void> Drainer::table_watch(int table_number) {
  const auto table = static_cast<Table>(table_number);
  std::uint64_t seen = store_.table_index(table);
  while (!stopping_) {
    std::uint64_t index = co_await store_.wait_for_change(table, seen, options_.max_wait);
    if (index > seen && (draining_ || table == Table::nodes)) wake_.notify();
    if (index <= seen) co_await async::sleep_for(50ms);  // timeout, or waiters released at shutdown
    seen = std::max(seen, index);
  }
}

}  // namespace mooring::controlplane::scheduler
