#include "services/controlplane/gc/claim_gc.hpp"

#include <algorithm>

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/claims/fault_switch.hpp"
#include "services/controlplane/claims/operation_id.hpp"
#include "services/controlplane/gc/release_calls.hpp"
#include "services/controlplane/gc/release_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/async/cancelled.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/metrics/families.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::gc {

using domain::in_quotes;

namespace asio = boost::asio;
using namespace std::chrono_literals;
using domain::ClaimState;
using Steady = std::chrono::steady_clock;

namespace {

constexpr auto kLongWait = std::chrono::hours(1);

domain::Event claim_event(const domain::Volume& v, const domain::Claim& c, std::string type, std::string message) {
  domain::Event e;
  e.topic = "Claim";
  e.type = std::move(type);
  e.ns = v.ns;
  e.key = v.id;
  e.message = std::move(message);
  e.details = {{"volume_id", v.id},
               {"allocation_id", c.allocation_id},
               {"node_id", c.node_id},
               {"plugin_id", v.plugin_id},
               {"state", std::string(domain::to_string(c.state))}};
  return e;
}

// Stages the volume after a release step. A volume being deregistered (purge) goes in the same
// write that frees its last claim: there is no moment at which it is claim-free and still there
// for a crash to leave behind, nor one at which it is gone with a claim unreleased.
void stage_volume(Batch& batch, const domain::Volume& v) {
  if (!v.deregistering || !v.claims.empty()) {
    batch.put(v);
    return;
  }
  batch.add_event({.topic = "Volume",
                   .type = "VolumeDeregistered",
                   .ns = v.ns,
                   .key = v.id,
                   .message = "deregistered volume " + in_quotes(v.id) + domain::in_namespace(v.ns) +
                              ": every claim released (purge)",
                   .details = {{"plugin_id", v.plugin_id}, {"purge", "true"}}});
  batch.erase_volume(domain::volume_key(v.ns, v.id));
}

}  // namespace

struct ClaimGc::Worker {
  explicit Worker(asio::any_io_executor ex) : wake(std::move(ex)) {}
  struct Retry {
    unsigned attempts = 0;
    Steady::time_point due{};
    ClaimState state = ClaimState::taken;  // the step that failed: a claim past it starts afresh
  };
  async::WakeSignal wake;
  std::map<std::string, Retry> retry;  // allocation id -> backoff state of its claim
};

ClaimGc::ClaimGc(asio::any_io_executor executor, StateStore& store, ChangeFeed& feed, ReleaseCalls& agents,
                 GcOptions options)
    : store_(store),
      agents_(agents),
      options_(std::move(options)),
      volume_changes_(feed.subscribe(Table::volumes)),
      tasks_(std::move(executor), "claim-gc") {
  if (auto* f = metrics::families()) {
    release_seconds_ = f->claim_release_seconds;
    node_detach_retries_ = f->gc_retries_total.with({{"step", "node-detach"}});
    controller_detach_retries_ = f->gc_retries_total.with({{"step", "controller-detach"}});
    free_retries_ = f->gc_retries_total.with({{"step", "free"}});
  }
}

ClaimGc::~ClaimGc() = default;

void ClaimGc::start() {
  if (started_) return;
  started_ = true;
  // Resume: every claim that was being released when we stopped (or crashed).
  std::size_t resumed = 0;
  for (const auto& [id, v] : store_.volumes()) {
    if (past_claims(v).empty()) continue;
    for (const auto& [alloc_id, claim] : v.claims)
      if (claim.state == ClaimState::node_detached)
        resumed_unpublishes_.insert(unpublish_operation_id(id, alloc_id, claim));
    kick(id);
    ++resumed;
  }
  if (resumed) log_.info("resuming releases", {{"volumes", resumed}});
  volume_changes_->take();  // the scan above covered everything written so far
  tasks_.spawn("volume-watch", [this] { return volume_loop(); });
  tasks_.spawn("node-watch", [this] { return wake_loop(static_cast<int>(Table::nodes)); });
  tasks_.spawn("plugin-watch", [this] { return wake_loop(static_cast<int>(Table::plugins)); });
  tasks_.spawn("sweep", [this] { return sweep_loop(); });
}

asio::awaitable<void> ClaimGc::stop() {
  stopping_ = true;
  tasks_.cancel();
  co_await tasks_.join();
}

void ClaimGc::kick(const std::string& volume_id) {
  if (auto it = workers_.find(volume_id); it != workers_.end()) {
    it->second->wake.notify();
    return;
  }
  if (tasks_.cancelled()) return;
  const domain::Volume* v = store_.volume(volume_id);
  if (!v || past_claims(*v).empty()) return;
  workers_.emplace(volume_id, std::make_unique<Worker>(tasks_.executor()));
  if (!tasks_.spawn("release " + volume_id, [this, volume_id] { return drive(volume_id); })) workers_.erase(volume_id);
}

void ClaimGc::retry_now(const std::string& volume_id) {
  if (auto it = workers_.find(volume_id); it != workers_.end()) it->second->retry.clear();
  kick(volume_id);
}

asio::awaitable<void> ClaimGc::volume_loop() {
  std::uint64_t seen = store_.table_index(Table::volumes);
  while (!stopping_) {
    std::uint64_t now = co_await store_.wait_for_change(Table::volumes, seen, kLongWait);
    // Only the volumes this change touched: the work is independent of how many volumes exist.
    for (const auto& id : volume_changes_->take()) {
      ++examined_;
      kick(id);
    }
    if (now <= seen) co_await async::sleep_for(50ms);  // timeout, or waiters released at shutdown
    seen = std::max(seen, now);
  }
}

asio::awaitable<void> ClaimGc::wake_loop(int table_number) {
  const auto table = static_cast<Table>(table_number);
  auto& waiters = table == Table::nodes ? node_waiters_ : plugin_waiters_;
  std::uint64_t seen = store_.table_index(table);
  while (!stopping_) {
    std::uint64_t now = co_await store_.wait_for_change(table, seen, kLongWait);
    // Only the objects someone waits for are looked at (heartbeats change nodes constantly).
    for (auto it = waiters.begin(); it != waiters.end();) {
      std::uint64_t index = 0;
      if (table == Table::nodes) {
        if (const auto* n = store_.node(it->first)) index = n->modify_index;
      } else if (const auto* p = store_.plugin(it->first)) {
        index = p->modify_index;
      }
      if (index == it->second.seen_index) {
        ++it;
        continue;
      }
      for (const auto& vol : it->second.volumes)
        if (auto w = workers_.find(vol); w != workers_.end()) {
          w->second->retry.clear();  // what it waited for changed: try again now
          w->second->wake.notify();
        }
      it = waiters.erase(it);
    }
    if (now <= seen) co_await async::sleep_for(50ms);
    seen = std::max(seen, now);
  }
}

asio::awaitable<void> ClaimGc::sweep_loop() {
  bool running = true;
  while (running) {
    // Not inside the loop condition: GCC 12 mishandles a coroutine temporary there.
    auto end = co_await async::sleep_for(options_.sweep_period);
    running = end != async::SleepEnd::cancelled;
    if (running) sweep();
  }
}

void ClaimGc::sweep() {
  ++sweeps_;
  std::vector<std::string> purged;  // deregistering with nothing left to release (never expected)
  for (const auto& [id, v] : store_.volumes())
    if (v.deregistering && v.claims.empty()) purged.push_back(id);
  for (const auto& id : purged) {
    Batch batch;
    stage_volume(batch, *store_.volume(id));
    if (auto r = store_.commit(std::move(batch)); !r)
      log_.error("cannot remove a deregistered volume", {{"volume_id", id}, {"error", r.error()}});
  }
  for (const auto& [id, v] : store_.volumes()) {
    if (workers_.count(id) || past_claims(v).empty()) continue;
    log_.warn("sweep found a past claim without a worker; starting it", {{"volume_id", id}});
    kick(id);
  }
}

void ClaimGc::wait_on(std::map<std::string, Waiters>& waiters, const std::string& key, std::uint64_t index,
                      const std::string& volume_id) {
  auto& w = waiters[key];
  if (w.volumes.empty()) w.seen_index = index;
  w.volumes.insert(volume_id);
}

std::chrono::milliseconds ClaimGc::next_delay(Worker& w, const std::string& alloc_id) {
  auto& r = w.retry[alloc_id];
  return options_.backoff.delay(r.attempts++);
}

asio::awaitable<void> ClaimGc::drive(std::string volume_id) {
  Worker& w = *workers_.at(volume_id);
  struct Erase {
    ClaimGc* gc;
    const std::string& id;
    ~Erase() { gc->workers_.erase(id); }
  } erase{this, volume_id};

  bool running = true;
  while (running) {
    auto generation = w.wake.generation();
    const domain::Volume* v = store_.volume(volume_id);
    if (!v) break;
    auto past = past_claims(*v);
    if (past.empty()) break;
    // A backoff belongs to the step that failed. A claim freed by someone else, or moved past
    // that step (the agent finished the unmount on its own once its plugin was back), starts
    // its next step at once instead of sleeping out the old step's delay.
    for (auto it = w.retry.begin(); it != w.retry.end();) {
      auto c = v->claims.find(it->first);
      it = c != v->claims.end() && c->second.state == it->second.state ? std::next(it) : w.retry.erase(it);
    }

    auto now = Steady::now();
    std::string next;
    auto earliest = Steady::time_point::max();
    for (const auto& alloc : past) {
      auto r = w.retry.find(alloc);
      if (r == w.retry.end() || r->second.due <= now) {
        next = alloc;
        break;
      }
      earliest = std::min(earliest, r->second.due);
    }
    if (next.empty()) {
      running = co_await async::sleep_for(earliest - now, &w.wake, generation) != async::SleepEnd::cancelled;
      continue;
    }
    co_await release_step(volume_id, next, w);
  }
}

namespace {

domain::Event released_event(const domain::Volume& v, const domain::Claim& c) {
  return claim_event(
      v, c, "ClaimReleased",
      "released the claim of allocation " + in_quotes(c.allocation_id) + " on volume " + in_quotes(v.id));
}

// The free-before-unpublish fault switch (test builds only, claims/fault_switch.hpp): the claim
// is freed before the ControllerUnpublish that must come first, for the chaos checker to catch.
void free_before_unpublish(StateStore& store, domain::Volume v, const std::string& alloc) {
  Batch batch;
  batch.add_event(released_event(v, v.claims.at(alloc)));
  free_claim(v, alloc);
  stage_volume(batch, v);
  (void)store.commit(std::move(batch));
}

// Applies every step that needs no RPC (skips and the final free) to `v`. Returns the first
// decision that needs the outside world, or a `free` decision once the claim is gone.
ReleaseDecision settle(domain::Volume& v, const std::string& alloc, const StateStore& store, Batch& batch,
                       bool& changed) {
  for (int i = 0; i < 8; ++i) {
    auto it = v.claims.find(alloc);
    if (it == v.claims.end()) return ReleaseDecision{};
    const auto& c = it->second;
    ReleaseView view{store.plugin(v.plugin_id), store.node(c.node_id), store.allocation(c.allocation_id),
                     domain::now()};
    auto d = decide_release(v, c, view);
    if (d.action == ReleaseAction::free) {
      batch.add_event(released_event(v, c));
      free_claim(v, alloc);
      changed = true;
      return d;
    }
    if (d.action != ReleaseAction::advance) return d;
    auto ev = claim_event(v, c, "ClaimStepSkipped",
                          "volume " + in_quotes(v.id) + ", allocation " + in_quotes(alloc) + ": " +
                              std::string(domain::to_string(c.state)) + " -> " + std::string(domain::to_string(d.to)) +
                              ": " + d.reason);
    if (advance_claim(v, alloc, d.to, domain::now())) return d;  // cannot move back: leave it to the next look
    batch.add_event(std::move(ev));
    changed = true;
  }
  return ReleaseDecision{ReleaseAction::wait_for_controller, ClaimState::ready_to_free, "release did not settle"};
}

// When a claim's release began, for mooring_claim_release_seconds: its allocation's last stop
// request (the operator's, the reconciler's), else the allocation's last event (it ended on its own
// or was lost), else the claim's last change. All durable, so a restart does not reset the clock.
domain::Time release_began(const domain::Allocation* alloc, const domain::Claim& claim) {
  if (alloc) {
    for (auto it = alloc->events.rbegin(); it != alloc->events.rend(); ++it)
      if (it->type == "StopRequested") return it->time;
    if (!alloc->events.empty()) return alloc->events.back().time;
  }
  return claim.update_time;
}

}  // namespace

asio::awaitable<void> ClaimGc::release_step(const std::string& volume_id, const std::string& alloc_id, Worker& w) {
  const domain::Volume* current = store_.volume(volume_id);
  if (!current || !current->claims.count(alloc_id)) co_return;

  domain::Volume v = *current;
  const domain::Time began = release_began(store_.allocation(alloc_id), v.claims.at(alloc_id));
  Batch batch;
  bool changed = false;
  auto d = settle(v, alloc_id, store_, batch, changed);
  if (changed) {
    stage_volume(batch, v);
    if (auto r = store_.commit(std::move(batch)); !r) {
      failure(volume_id, alloc_id, w, "cannot persist the release step: " + r.error(), next_delay(w, alloc_id));
      co_return;
    }
    if (d.action == ReleaseAction::free) {
      release_seconds_.observe(domain::now() - began);
      w.retry.erase(alloc_id);
      co_return;
    }
  }
  const domain::Claim claim = v.claims.at(alloc_id);
  switch (d.action) {
    case ReleaseAction::free:
    case ReleaseAction::advance: co_return;
    case ReleaseAction::wait_for_node: {
      const auto* node = store_.node(claim.node_id);
      wait_on(node_waiters_, claim.node_id, node ? node->modify_index : 0, volume_id);
      auto delay = options_.node_wait_recheck;
      if (domain::is_set(d.retry_at))
        delay = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(d.retry_at - domain::now()) + 10ms,
                           std::chrono::milliseconds(10), options_.node_wait_recheck);
      failure(volume_id, alloc_id, w, d.reason, delay);
      co_return;
    }
    case ReleaseAction::wait_for_controller:
      wait_for_plugin(v.plugin_id, volume_id);
      failure(volume_id, alloc_id, w, d.reason, next_delay(w, alloc_id));
      co_return;
    case ReleaseAction::detach_node:
      if (co_await detach_node(volume_id, v, claim, w))
        persist_step(volume_id, alloc_id, ClaimState::node_detached, d.reason, began, w);
      co_return;
    case ReleaseAction::unpublish_controller:
      if (co_await unpublish_controller(volume_id, v, claim, d.external_node_id, w))
        persist_step(volume_id, alloc_id, ClaimState::controller_detached, d.reason, began, w);
      co_return;
  }
}

// Not done: woken when the plugin's health changes (its node plugin is back), not only by the timer.
asio::awaitable<bool> ClaimGc::detach_node(const std::string& volume_id, const domain::Volume& v,
                                           const domain::Claim& claim, Worker& w) {
  auto req = node_detach_request(volume_id, v, claim);
  std::string node_id = claim.node_id;
  auto res = co_await agents_.node_detach_volume(std::move(node_id), std::move(req));
  if (res.done()) co_return true;
  wait_for_plugin(v.plugin_id, volume_id);
  failure(volume_id, claim.allocation_id, w, res.error, next_delay(w, claim.allocation_id));
  co_return false;
}

// Not done (no controller to ask, or the one asked failed): a change of the plugin (a controller
// healthy again, a new instance) retries at once.
asio::awaitable<bool> ClaimGc::unpublish_controller(const std::string& volume_id, const domain::Volume& v,
                                                    const domain::Claim& claim, const std::string& external_node_id,
                                                    Worker& w) {
  const std::string& alloc_id = claim.allocation_id;
  if (fault_switch(FaultSwitch::free_before_unpublish)) free_before_unpublish(store_, v, alloc_id);
  auto req = controller_unpublish_request(v, external_node_id);
  std::string operation = unpublish_operation_id(volume_id, alloc_id, claim);
  if (resumed_unpublishes_.contains(operation)) {
    // Sent before the restart or failover, perhaps: do not send it twice if it happened.
    const PublishedCheck check = co_await still_published(v, external_node_id);
    if (!check.unreachable.empty()) {
      wait_for_plugin(v.plugin_id, volume_id);
      failure(volume_id, alloc_id, w, "asking whether the volume is still published: " + check.unreachable,
              next_delay(w, alloc_id));
      co_return false;
    }
    if (check.published == false) {
      log_.info(
          "resumed release: the volume is no longer published to the node; controller-detached without "
          "ControllerUnpublishVolume",
          {{"volume_id", volume_id}, {"alloc_id", alloc_id}, {"csi_node_id", external_node_id}});
      resumed_unpublishes_.erase(operation);
      co_return true;
    }
  }
  std::string plugin_id = v.plugin_id, key = volume_id, sent = operation;
  auto res = co_await agents_.controller_unpublish_volume(std::move(plugin_id), std::move(key), std::move(req),
                                                          std::move(sent));
  if (!res.done()) {
    wait_for_plugin(v.plugin_id, volume_id);
    failure(volume_id, alloc_id, w, res.error, next_delay(w, alloc_id));
    co_return false;
  }
  resumed_unpublishes_.erase(operation);
  co_return true;
}

// The step's RPC succeeded: persist it (and whatever follows without an RPC) before the next.
void ClaimGc::persist_step(const std::string& volume_id, const std::string& alloc_id, ClaimState target,
                           const std::string& reason, domain::Time began, Worker& w) {
  w.retry.erase(alloc_id);
  const domain::Volume* current = store_.volume(volume_id);
  if (!current) return;
  auto it = current->claims.find(alloc_id);
  if (it == current->claims.end() || !domain::is_before(it->second.state, target)) return;
  domain::Volume after = *current;
  Batch done;
  done.add_event(claim_event(after, it->second,
                             target == ClaimState::node_detached ? "ClaimNodeDetached" : "ClaimControllerDetached",
                             "volume " + in_quotes(volume_id) + ", allocation " + in_quotes(alloc_id) + ": " +
                                 std::string(domain::to_string(target)) + " (" + reason + ")"));
  if (advance_claim(after, alloc_id, target, domain::now())) return;
  bool more = false;
  const auto settled = settle(after, alloc_id, store_, done, more);
  stage_volume(done, after);
  if (auto r = store_.commit(std::move(done)); !r)
    failure(volume_id, alloc_id, w, "cannot persist the release step: " + r.error(), next_delay(w, alloc_id));
  else if (settled.action == ReleaseAction::free)
    release_seconds_.observe(domain::now() - began);
}

void ClaimGc::wait_for_plugin(const std::string& plugin_id, const std::string& volume_id) {
  const auto* p = store_.plugin(plugin_id);
  wait_on(plugin_waiters_, plugin_id, p ? p->modify_index : 0, volume_id);
}

void ClaimGc::failure(const std::string& volume_id, const std::string& alloc_id, Worker& w, const std::string& error,
                      std::chrono::milliseconds delay) {
  w.retry[alloc_id].due = Steady::now() + delay;
  const domain::Volume* current = store_.volume(volume_id);
  if (!current) return;
  auto it = current->claims.find(alloc_id);
  if (it == current->claims.end()) return;
  w.retry[alloc_id].state = it->second.state;
  // The step that failed, by where the claim stands: node side, controller side, or the free.
  switch (it->second.state) {
    case ClaimState::taken:
    case ClaimState::unpublishing: node_detach_retries_.inc(); break;
    case ClaimState::node_detached: controller_detach_retries_.inc(); break;
    default: free_retries_.inc(); break;
  }
  bool new_error = it->second.last_error != error;
  domain::Volume v = *current;
  auto now = domain::now();
  auto next_attempt = now + delay;
  if (record_release_failure(v, alloc_id, error, next_attempt, now)) return;
  Batch batch;
  if (new_error) {
    batch.add_event(claim_event(v, v.claims.at(alloc_id), "ClaimReleaseFailed",
                                "volume " + in_quotes(volume_id) + ", allocation " + in_quotes(alloc_id) + " (" +
                                    std::string(domain::to_string(it->second.state)) + "): " + error));
    log_.warn("release step failed; will retry", {{"volume_id", volume_id},
                                                  {"allocation_id", alloc_id},
                                                  {"state", domain::to_string(it->second.state)},
                                                  {"error", error},
                                                  {"retry_in", delay}});
  }
  batch.put(std::move(v));
  if (auto r = store_.commit(std::move(batch)); !r)
    log_.error("cannot record a release failure", {{"volume_id", volume_id}, {"error", r.error()}});
}

}  // namespace mooring::controlplane::gc
