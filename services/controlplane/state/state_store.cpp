#include "services/controlplane/state/state_store.hpp"

#include <algorithm>
#include <functional>
#include <cstdio>
#include <limits>
#include <utility>

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "services/controlplane/state/state_writer.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/storage_text.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"
#include "shared/metrics/families.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;

namespace {

// mooring_state_commit_seconds: taken once, at the first write (main enables metrics before any);
// null with metrics off.
const metrics::Histogram& commit_seconds() {
  static const metrics::Histogram h =
      metrics::families() ? metrics::families()->state_commit_seconds : metrics::Histogram{};
  return h;
}

}  // namespace

std::string event_key(std::uint64_t index, std::size_t position) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%020llu-%06zu", static_cast<unsigned long long>(index), position);
  return buf;
}

StateStore::StateStore(asio::any_io_executor executor, StateBackend& backend, StateOptions options)
    : executor_(std::move(executor)), backend_(backend), options_(options) {
  if (options_.group_commit) writer_ = std::make_unique<Writer>();
}

StateStore::~StateStore() {
  writer_.reset();  // waits for a flush in flight; its answer is not needed any more
  // Best effort: nobody was told these commits are durable, but there is no reason to drop them.
  if (!pending_.empty()) (void)backend_.apply_group(pending_);
}

std::uint64_t StateStore::table_index(Table t) const {
  auto it = table_index_.find(t);
  return it == table_index_.end() ? 0 : it->second;
}

std::uint64_t StateStore::answer_index(Table t) const {
  auto& answered = answered_[t];
  if (durable_index_ < index_) answered = index_;
  return std::max(answered, table_index(t));
}

namespace {

template <class T>
const T* find(const std::map<std::string, T>& m, const std::string& id) {
  auto it = m.find(id);
  return it == m.end() ? nullptr : &it->second;
}

std::string storage_text(const domain::Volume& v) { return domain::to_storage_text(v); }
std::string storage_text(const domain::Plugin& p) { return domain::to_storage_text(p); }
std::string storage_text(const domain::Node& n) { return domain::to_storage_text(n); }
std::string storage_text(const domain::Allocation& a) { return domain::to_storage_text(a); }
std::string storage_text(const acl::Policy& p) { return acl::to_json(p).dump(); }
std::string storage_text(const acl::Token& t) { return acl::to_storage_text(t); }
std::string storage_text(const SnapshotRecord& r) { return to_storage_text(r); }
std::string storage_text(const domain::NodeIdentity& n) { return domain::to_storage_text(n); }
std::string storage_text(const NamespaceRecord& n) { return to_storage_text(n); }

// Stamps indexes on the batch's objects and appends their mutations.
template <class T>
void stage(Table t, std::map<std::string, std::optional<T>>& staged, const std::map<std::string, T>& current,
           std::uint64_t index, Transaction& tx) {
  for (auto& [id, obj] : staged) {
    if (!obj) {
      tx.mutations.push_back({t, id, std::nullopt});
      continue;
    }
    auto existing = current.find(id);
    obj->create_index = existing == current.end() ? index : existing->second.create_index;
    obj->modify_index = index;
    tx.mutations.push_back({t, id, storage_text(*obj)});
  }
}

template <class T>
void install(std::map<std::string, std::optional<T>>& staged, std::map<std::string, T>& current) {
  for (auto& [id, obj] : staged) {
    if (obj)
      current.insert_or_assign(id, std::move(*obj));
    else
      current.erase(id);
  }
}

}  // namespace

const domain::Volume* StateStore::volume(const std::string& key) const { return find(volumes_, key); }
const domain::Plugin* StateStore::plugin(const std::string& id) const { return plugins_.find(id); }
const domain::Node* StateStore::node(const std::string& id) const { return find(nodes_, id); }
const domain::Allocation* StateStore::allocation(const std::string& id) const { return find(allocations_, id); }
const IdempotentRequest* StateStore::idempotent_request(const std::string& key) const { return find(requests_, key); }
const acl::Policy* StateStore::acl_policy(const std::string& name) const { return find(acl_policies_, name); }
const acl::Token* StateStore::acl_token(const std::string& accessor_id) const { return find(acl_tokens_, accessor_id); }
const SnapshotRecord* StateStore::snapshot_record(const std::string& plugin_id, const std::string& id) const {
  return find(snapshots_, snapshot_record_key(plugin_id, id));
}
const domain::NodeIdentity* StateStore::node_identity(const std::string& id) const {
  return find(node_identities_, id);
}
const NamespaceRecord* StateStore::namespace_record(const std::string& name) const { return find(namespaces_, name); }

const acl::Token* StateStore::acl_token_by_secret_hash(const std::string& hash) const {
  auto it = acl_token_by_hash_.find(hash);
  return it == acl_token_by_hash_.end() ? nullptr : acl_token(it->second);
}

std::vector<std::string> StateStore::requests_answered_before(domain::Time before, std::size_t max) const {
  std::vector<std::string> out;
  for (auto it = requests_by_time_.begin(); it != requests_by_time_.end() && it->first < before && out.size() < max;
       ++it)
    out.push_back(it->second);
  return out;
}

void StateStore::install_allocations(std::map<std::string, std::optional<domain::Allocation>>& staged) {
  for (auto& [id, alloc] : staged) {
    if (auto old = allocations_.find(id); old != allocations_.end()) unindex_allocation(old->second);
    if (alloc) index_allocation(*alloc);
  }
  install(staged, allocations_);
}

void StateStore::install_volumes(std::map<std::string, std::optional<domain::Volume>>& staged) {
  for (auto& [id, volume] : staged) {
    if (auto old = volumes_.find(id); old != volumes_.end()) {
      index_claims(old->second, false);
      index_backend(id, old->second, false);
    }
    if (volume) {
      index_claims(*volume, true);
      index_backend(id, *volume, true);
    }
  }
  install(staged, volumes_);
}

domain::Expected<std::uint64_t> StateStore::commit(Batch batch) {
  if (!ready_) return domain::error("state is not loaded");
  if (read_only_) return domain::error(*read_only_);
  if (broken_) return domain::error("the state is not writable: " + *broken_);
  if (batch.empty()) return index_;
  const std::uint64_t next = index_ + 1;
  Transaction tx;
  tx.index = next;
  const std::size_t dropped = stage_batch(batch, tx);
  if (!options_.group_commit) {
    const auto started = std::chrono::steady_clock::now();
    if (auto st = backend_.apply(tx); !st) return domain::error(st.error());
    commit_seconds().observe(std::chrono::steady_clock::now() - started);
  }
  install_batch(batch, dropped, next);
  index_ = next;
  if (!options_.group_commit) {
    durable_index_ = next;
    for (auto t : tx.tables) {
      table_index_[t] = next;
      notify(t);
    }
    return next;
  }
  pending_.push_back(std::move(tx));
  schedule_flush();
  return next;
}

// The batch's rows as the mutations of transaction `tx` (its index stamped on every object and
// event), the oldest events trimmed in the same transaction so the table never grows without
// bound, and the tables it touches. Returns how many old events it trims.
std::size_t StateStore::stage_batch(Batch& batch, Transaction& tx) const {
  const std::uint64_t next = tx.index;
  stage(Table::volumes, batch.volumes_, volumes_, next, tx);
  stage(Table::nodes, batch.nodes_, nodes_, next, tx);
  stage(Table::allocations, batch.allocations_, allocations_, next, tx);
  stage(Table::acl_policies, batch.acl_policies_, acl_policies_, next, tx);
  stage(Table::acl_tokens, batch.acl_tokens_, acl_tokens_, next, tx);
  stage(Table::snapshots, batch.snapshots_, snapshots_, next, tx);
  stage(Table::node_identities, batch.node_identities_, node_identities_, next, tx);
  stage(Table::namespaces, batch.namespaces_, namespaces_, next, tx);
  for (auto& [key, r] : batch.requests_) {
    if (r) {
      auto existing = requests_.find(key);
      r->create_index = existing == requests_.end() ? next : existing->second.create_index;
      r->modify_index = next;
    }
    tx.mutations.push_back({Table::requests, key, r ? std::optional<std::string>(to_storage_text(*r)) : std::nullopt});
  }
  auto now = domain::now();
  const auto mono =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  for (std::size_t i = 0; i < batch.events_.size(); ++i) {
    auto& e = batch.events_[i];
    e.index = next;
    if (!domain::is_set(e.time)) e.time = now;
    e.monotonic_ns = mono;
    tx.mutations.push_back({Table::events, event_key(next, i), domain::to_storage_text(e)});
  }
  std::size_t total = events_.size() + batch.events_.size();
  std::size_t drop = total > options_.max_events ? std::min(total - options_.max_events, events_.size()) : 0;
  for (std::size_t i = 0; i < drop; ++i)
    tx.mutations.push_back({Table::events, event_key(events_[i].index, event_positions_[i]), std::nullopt});

  auto& touched = tx.tables;
  if (!batch.volumes_.empty()) touched.push_back(Table::volumes);
  if (stage_plugin_rows(batch, tx)) touched.push_back(Table::plugins);
  if (!batch.nodes_.empty()) touched.push_back(Table::nodes);
  if (!batch.allocations_.empty()) touched.push_back(Table::allocations);
  if (!batch.requests_.empty()) touched.push_back(Table::requests);
  if (!batch.acl_policies_.empty()) touched.push_back(Table::acl_policies);
  if (!batch.acl_tokens_.empty()) touched.push_back(Table::acl_tokens);
  if (!batch.snapshots_.empty()) touched.push_back(Table::snapshots);
  if (!batch.node_identities_.empty()) touched.push_back(Table::node_identities);
  if (!batch.namespaces_.empty()) touched.push_back(Table::namespaces);
  if (!batch.events_.empty() || drop > 0) touched.push_back(Table::events);
  return drop;
}

// A plugin's row, for the plugins a batch's nodes change (and, with rewrite_plugin_rows(), those
// the load found stale): its id and indexes, or a deletion once its last instance goes. O(1)
// bytes however many nodes run it; the aggregate itself follows in install_batch(). Returns
// whether it wrote any.
bool StateStore::stage_plugin_rows(const Batch& batch, Transaction& tx) const {
  std::map<std::string, long> gained;  // plugin id -> entries its nodes gain in this batch
  for (const auto& [id, n] : batch.nodes_)
    for (const auto& [plugin_id, g] : PluginAggregates::changes(node(id), n ? &*n : nullptr)) gained[plugin_id] += g;
  std::set<std::string> rewrite;  // stale rows only rewritten: their content does not change
  if (batch.rewrite_plugin_rows_)
    for (const auto& id : stale_plugin_rows_)
      if (gained.try_emplace(id, 0).second) rewrite.insert(id);
  for (const auto& [id, g] : gained) {
    const domain::Plugin* now = plugins_.find(id);
    if (static_cast<long>(plugins_.entries(id)) + g <= 0) {
      tx.mutations.push_back({Table::plugins, id, std::nullopt});
      continue;
    }
    domain::Plugin row;
    row.id = id;
    row.create_index = now ? now->create_index : tx.index;
    row.modify_index = now && rewrite.contains(id) ? now->modify_index : tx.index;
    tx.mutations.push_back({Table::plugins, id, storage_text(row)});
  }
  return !gained.empty();
}

// The staged batch into memory and its indexes; the `dropped` oldest events out.
void StateStore::install_batch(Batch& batch, std::size_t dropped, std::uint64_t index) {
  install_volumes(batch.volumes_);
  for (const auto& [id, n] : batch.nodes_) plugins_.apply(node(id), n ? &*n : nullptr, index);
  if (batch.rewrite_plugin_rows_) stale_plugin_rows_.clear();
  install(batch.nodes_, nodes_);
  install_allocations(batch.allocations_);
  install(batch.acl_policies_, acl_policies_);
  install(batch.snapshots_, snapshots_);
  for (auto& [accessor, t] : batch.acl_tokens_) {
    if (auto old = acl_tokens_.find(accessor); old != acl_tokens_.end())
      acl_token_by_hash_.erase(old->second.secret_hash);
    if (!t) continue;
    acl_token_by_hash_.insert_or_assign(t->secret_hash, accessor);
    acl_bootstrapped_ = true;
  }
  install(batch.acl_tokens_, acl_tokens_);
  install(batch.node_identities_, node_identities_);
  install(batch.namespaces_, namespaces_);
  for (auto& [key, r] : batch.requests_) {
    if (auto old = requests_.find(key); old != requests_.end()) {
      requests_by_time_.erase({old->second.time, key});
      requests_.erase(old);
    }
    if (r) {
      requests_by_time_.emplace(r->time, key);
      requests_.emplace(key, std::move(*r));
    }
  }
  for (std::size_t i = 0; i < dropped; ++i) {
    events_.pop_front();
    event_positions_.pop_front();
  }
  for (std::size_t i = 0; i < batch.events_.size(); ++i) {
    events_.push_back(std::move(batch.events_[i]));
    event_positions_.push_back(i);
  }
}

void StateStore::schedule_flush() {
  if (flush_scheduled_ || flushing_) return;  // the flush in flight schedules the next when it ends
  flush_scheduled_ = true;
  // Posted, not run now: every coroutine already queued on the executor gets to commit first and
  // rides the same fsync.
  asio::post(executor_, [this, alive = std::weak_ptr<int>(alive_)] {
    if (alive.lock()) (void)flush();
  });
}

void StateStore::flush() {
  flush_scheduled_ = false;
  if (pending_.empty() || flushing_ || reloading_) return;  // after a reload nothing pending is left
  flushing_ = true;
  auto txs = std::make_shared<std::vector<Transaction>>(std::exchange(pending_, {}));
  // Tracked: the io_context keeps running while the writer has the flush, so its answer lands.
  auto ex = asio::prefer(executor_, asio::execution::outstanding_work.tracked);
  writer_->submit([this, txs, ex, alive = std::weak_ptr<int>(alive_)] {
    domain::Status st;
    const auto started = std::chrono::steady_clock::now();
    try {  // a throw must not end the writer thread: the store would wait for this answer forever
      st = backend_.apply_group(*txs);
      if (st) commit_seconds().observe(std::chrono::steady_clock::now() - started);  // thread-safe
    } catch (const std::exception& e) {
      st = domain::error(std::string("state write threw: ") + e.what());
    }
    std::map<Table, std::uint64_t> touched;  // table -> the last of these commits that touched it
    for (const auto& tx : *txs)
      for (auto t : tx.tables) touched[t] = tx.index;
    asio::post(ex, [this, alive, last = txs->back().index, touched = std::move(touched), st = std::move(st)]() mutable {
      if (alive.lock()) flushed(last, std::move(touched), std::move(st));
    });
  });
}

void StateStore::flushed(std::uint64_t last_index, std::map<Table, std::uint64_t> touched, domain::Status st) {
  flushing_ = false;
  if (!st) {
    recover(st.error());
    return;
  }
  // Table indexes move only now, so a watcher woken by one finds the change durable (and the
  // change feed's keys recorded).
  for (const auto& [t, index] : touched) table_index_[t] = index;
  durable_index_ = last_index;
  for (const auto& [t, index] : touched) notify(t);
  wake_durable({});
  if (!pending_.empty()) schedule_flush();  // what was committed meanwhile
}

void StateStore::recover(const std::string& error) {
  static const log::Logger log{"state"};
  const std::uint64_t handed_out = index_;
  log.error("state write failed; reloading what is durable",
            {{"error", error}, {"lost_from_index", durable_index_ + 1}, {"lost_to_index", handed_out}});
  lost_.push_back({durable_index_ + 1, handed_out, "the state write failed: " + error});
  wake_durable(domain::error(lost_.back().error));
  pending_.clear();  // committed after the failed ones, on top of them: lost with them
  if (auto st = reload(); !st) {
    // Memory keeps writes that are not on disk; durable() fails from now on, so nothing built
    // on them leaves the process.
    broken_ = error + "; reloading the state failed too: " + st.error();
    log.error("cannot reload the state; refusing writes until it reloads", {{"error", st.error()}});
    if (options_.on_broken) options_.on_broken(*broken_);
  }
}

}  // namespace mooring::controlplane
