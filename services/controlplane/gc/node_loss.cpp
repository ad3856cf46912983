#include "services/controlplane/gc/node_loss.hpp"

#include <algorithm>
#include <map>

#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/gc/release_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/sleep.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::gc {

using domain::in_quotes;

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {}  // namespace

void mark_allocation_lost(const StateStore& store, const domain::Allocation& alloc, const std::string& reason,
                          Batch& batch, domain::Time now) {
  domain::Allocation a = alloc;
  a.client_status = domain::ClientStatus::lost;
  a.desired_status = domain::DesiredStatus::stop;
  a.events.push_back({now, "Lost", reason});
  batch.add_event({.topic = "Allocation",
                   .type = "AllocationLost",
                   .ns = a.ns,
                   .key = a.id,
                   .message = "allocation " + in_quotes(a.id) + ": " + reason,
                   .details = {{"node_id", a.node_id}}});
  std::map<std::string, domain::Volume> volumes;
  for (const auto& [name, req] : a.volumes) {
    auto vid = domain::claimed_volume_key(a, req);
    const domain::Volume* v = volumes.count(vid) ? &volumes.at(vid) : store.volume(vid);
    if (!v) continue;
    auto it = v->claims.find(a.id);
    if (it == v->claims.end() || it->second.state != domain::ClaimState::taken) continue;
    domain::Volume copy = *v;
    if (advance_claim(copy, a.id, domain::ClaimState::unpublishing, now)) continue;
    volumes[vid] = std::move(copy);
  }
  for (auto& [id, v] : volumes) batch.put(std::move(v));
  batch.put(std::move(a));
}

NodeLossMonitor::NodeLossMonitor(asio::any_io_executor executor, StateStore& store, NodeLossOptions options)
    : store_(store), options_(options), tasks_(std::move(executor), "node-loss") {}

NodeLossMonitor::~NodeLossMonitor() = default;

void NodeLossMonitor::start() {
  tasks_.spawn("node-loss", [this] { return loop(); });
}

asio::awaitable<void> NodeLossMonitor::stop() {
  stopping_ = true;
  tasks_.cancel();
  co_await tasks_.join();
}

domain::Time NodeLossMonitor::check(domain::Time now) {
  std::set<std::string> down;
  for (const auto& [id, n] : store_.nodes())
    if (n.status == domain::NodeStatus::down) down.insert(id);
  bool due = domain::is_set(next_deadline_) && now >= next_deadline_;
  if (down == down_ && !due) return next_deadline_;
  down_ = down;
  next_deadline_ = domain::Time{};
  if (down.empty()) return next_deadline_;

  ++scans_;
  Batch batch;
  std::size_t lost = 0;
  for (const auto& node_id : down) {
    const domain::Node& node = *store_.node(node_id);  // `down` was read from the nodes table
    for (const auto& id : store_.live_allocation_ids_on(node_id)) {
      const domain::Allocation& a = *store_.allocation(id);
      if (a.stop_after_client_disconnect <= domain::Duration::zero()) continue;
      domain::Time at = abandon_time(node, &a);
      if (now < at) {
        if (!domain::is_set(next_deadline_) || at < next_deadline_) next_deadline_ = at;
        continue;
      }
      mark_allocation_lost(store_, a,
                           "node " + in_quotes(a.node_id) +
                               " has been down for longer than stop_after_client_disconnect (" +
                               domain::format_duration(a.stop_after_client_disconnect) +
                               "); the allocation is considered stopped and its volumes are released",
                           batch, now);
      ++lost;
    }
  }
  if (lost) {
    if (auto r = store_.commit(std::move(batch)); !r) {
      log_.error("cannot mark allocations of down nodes lost; retrying", {{"error", r.error()}});
      down_.clear();  // forces a rescan next time
      next_deadline_ = now + 1s;
    } else {
      log_.info("allocations on down nodes considered stopped", {{"count", lost}});
    }
  }
  return next_deadline_;
}

asio::awaitable<void> NodeLossMonitor::loop() {
  std::uint64_t seen = store_.table_index(Table::nodes);
  while (!stopping_) {
    auto now = domain::now();
    auto next = check(now);
    auto wait = options_.max_wait;
    if (domain::is_set(next))
      wait = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(next - now) + 5ms,
                        std::chrono::milliseconds(5), options_.max_wait);
    auto started = std::chrono::steady_clock::now();
    auto index = co_await store_.wait_for_change(Table::nodes, seen, wait);
    // A wait that returns early without a change: the store released its waiters (shutdown).
    if (index <= seen && std::chrono::steady_clock::now() - started < wait / 2) co_await async::sleep_for(50ms);
    seen = std::max(seen, index);
  }
}

}  // namespace mooring::controlplane::gc
