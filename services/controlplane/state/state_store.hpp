// State room: the control plane's state in memory, made durable through a StateBackend.
// Every write is a Batch committed as one backend transaction. Each commit takes the next state
// index; objects get create/modify indexes, tables remember their last index, and coroutines can
// wait for a table to move past an index (blocking queries, the claim GC).
// Single-threaded: use from the control plane's io executor only. Read, check, then commit
// without suspending in between, and no other writer can interleave.
//
// Two ways to make a commit durable (StateOptions::group_commit):
// - direct: commit() writes to the backend before memory changes; a failed write changes nothing.
// - group commit (the binary): commit() changes memory at once and returns; a flush posted to the
//   executor hands every commit made meanwhile to the store's writer thread, which writes them
//   in one backend transaction (one fsync for a whole wave of GC steps or agent reports) while
//   the executor goes on serving; commits made during a flush ride the next one, and the
//   writer's answer comes back through the executor. Memory may therefore run ahead of the disk, so
//   nothing that depends on the state may leave the process before durable(index()) says it is
//   on disk: the REST API, the agent service and the agent router wait for it before they answer
//   or call out. If a flush fails, memory is reloaded from the backend (what is durable), every
//   table index moves past anything handed out so watchers re-read, and the waiters get the error.
// Watchers of a table are woken only once its change is durable, in both modes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "services/controlplane/acl/policy.hpp"
#include "services/controlplane/acl/token.hpp"
#include "services/controlplane/state/backend.hpp"
#include "services/controlplane/state/idempotent_request.hpp"
#include "services/controlplane/state/namespace_record.hpp"
#include "services/controlplane/state/plugin_aggregates.hpp"
#include "services/controlplane/state/snapshot_record.hpp"
#include "services/controlplane/state/table.hpp"
#include "shared/domain/allocation.hpp"
#include "shared/domain/event.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/node_identity.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane {

// The writes of one transaction. Objects are whole (read a copy, change it, put it back).
// Plugins are not written directly: a plugin's aggregate follows the instances its nodes hold
// (put a node with its plugins; state/plugin_aggregates.hpp).
class Batch {
 public:
  void put(domain::Volume v) {
    auto key = domain::volume_key(v.ns, v.id);
    volumes_[std::move(key)] = std::move(v);
  }
  void put(domain::Node n) { nodes_[n.id] = std::move(n); }
  void put(domain::Allocation a) { allocations_[a.id] = std::move(a); }
  void erase_volume(const std::string& key) { volumes_[key] = std::nullopt; }  // domain::volume_key
  void erase_node(const std::string& id) { nodes_[id] = std::nullopt; }
  void erase_allocation(const std::string& id) { allocations_[id] = std::nullopt; }
  // The event's index and (when unset) time are filled in at commit.
  void add_event(domain::Event e) { events_.push_back(std::move(e)); }
  void remember(IdempotentRequest r) { requests_[r.key] = std::move(r); }
  void forget_request(const std::string& key) { requests_[key] = std::nullopt; }
  void put(acl::Policy p) { acl_policies_[p.name] = std::move(p); }
  void put(acl::Token t) { acl_tokens_[t.accessor_id] = std::move(t); }
  void erase_acl_policy(const std::string& name) { acl_policies_[name] = std::nullopt; }
  void erase_acl_token(const std::string& accessor_id) { acl_tokens_[accessor_id] = std::nullopt; }
  void put(SnapshotRecord r) {
    auto key = snapshot_record_key(r.plugin_id, r.id);
    snapshots_[std::move(key)] = std::move(r);
  }
  void erase_snapshot(const std::string& plugin_id, const std::string& id) {
    snapshots_[snapshot_record_key(plugin_id, id)] = std::nullopt;
  }
  void put(domain::NodeIdentity n) { node_identities_[n.node_id] = std::move(n); }
  void erase_node_identity(const std::string& node_id) { node_identities_[node_id] = std::nullopt; }
  void put(NamespaceRecord n) { namespaces_[n.name] = std::move(n); }
  // Upgrade: the plugin rows the load found in an older form (StateStore::stale_plugin_rows())
  // are written again in this transaction.
  void rewrite_plugin_rows() { rewrite_plugin_rows_ = true; }
  void erase_namespace(const std::string& name) { namespaces_[name] = std::nullopt; }

  bool empty() const {
    return !rewrite_plugin_rows_ && volumes_.empty() && nodes_.empty() && allocations_.empty() && events_.empty() &&
           requests_.empty() && acl_policies_.empty() && acl_tokens_.empty() && snapshots_.empty() &&
           node_identities_.empty() && namespaces_.empty();
  }

 private:
  friend class StateStore;
  std::map<std::string, std::optional<domain::Volume>> volumes_;
  bool rewrite_plugin_rows_ = false;
  std::map<std::string, std::optional<domain::Node>> nodes_;
  std::map<std::string, std::optional<domain::Allocation>> allocations_;
  std::vector<domain::Event> events_;
  std::map<std::string, std::optional<IdempotentRequest>> requests_;
  std::map<std::string, std::optional<acl::Policy>> acl_policies_;
  std::map<std::string, std::optional<acl::Token>> acl_tokens_;
  std::map<std::string, std::optional<SnapshotRecord>> snapshots_;
  std::map<std::string, std::optional<domain::NodeIdentity>> node_identities_;
  std::map<std::string, std::optional<NamespaceRecord>> namespaces_;
};

struct StateOptions {
  std::size_t max_events = 5000;  // oldest events are dropped (in the same transaction) beyond this
  bool group_commit = false;      // see the top of this file
  // Called (on the store's executor) when a failed write could not be followed by a reload, so
  // the store refuses writes until restarted: a leader of several control planes steps down then.
  std::function<void(const std::string& why)> on_broken;
};

class StateStore {
 public:
  StateStore(boost::asio::any_io_executor executor, StateBackend& backend, StateOptions options = {});
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Reads everything from the backend. A row that does not decode fails the load (naming the
  // table and key): starting with a silently partial state would drop claims.
  domain::Status load();
  bool ready() const { return ready_; }
  // Reads the state again after writes of unknown outcome (a leader that lost etcd's quorum with
  // a Txn in flight: it may commit when the quorum returns): memory becomes what is durable,
  // every index moves on, never back (watchers re-read), and a broken store writes again. Not
  // while flushing() (the backend is the writer thread's then).
  domain::Status reload();
  // reload() with the backend's read on the writer thread (group commit; else reload() itself),
  // so the executor goes on answering reads from memory while etcd sends a large state; memory
  // changes at once on the executor when it is read. For a leader resuming after etcd's quorum
  // loss, while set_read_only() refuses writes (otherwise it is reload()). Cancelling the awaiting coroutine
  // throws operation_aborted; the read then finishes on the writer thread, unused.
  boost::asio::awaitable<domain::Status> reload_in_background();
  // A flush failed and reloading failed too (on_broken was called): memory past durable_index()
  // may or may not be committed, and writes are refused until reload() succeeds.
  bool broken() const { return broken_.has_value(); }
  // High availability: while set, commit() refuses with this reason and changes nothing, memory
  // included (a leader cut off from etcd's quorum refuses writes but keeps serving reads). Setting
  // it releases every readable_since() waiting for a flush in flight.
  void set_read_only(std::optional<std::string> why);
  bool read_only() const { return read_only_.has_value(); }
  // High availability: while set, reads are answered from memory at once as while read_only()
  // (setting it releases every readable_since() waiting), but commits go on: a leader whose lease
  // etcd has not confirmed in time holds writes rather than refusing them (ha/lease_hold.hpp), and
  // a read must not wait for a flush that etcd cannot answer now.
  void set_reads_from_memory(bool on);

  // ---- reads ----
  std::uint64_t index() const { return index_; }
  // Drawn at random (never 0) each time memory is installed from the backend (load, reload), so
  // no two loads share one, in this process or any other. An index says something only within its
  // incarnation: after a load the state may not extend what was answered before (a restore, another
  // leader, a failed write taken back) and a modify index can come back with other content.
  std::uint64_t incarnation() const { return incarnation_; }
  // Index of the last durable commit that touched the table (0 if none). With group commit it
  // may trail index(): a commit counts here once flushed.
  std::uint64_t table_index(Table t) const;

  // Volumes are keyed by domain::volume_key(ns, id): their id in "default", "ns:id" elsewhere.
  const domain::Volume* volume(const std::string& key) const;
  const domain::Volume* volume(std::string_view ns, std::string_view id) const {
    return volume(domain::volume_key(ns, id));
  }
  const domain::Plugin* plugin(const std::string& id) const;
  const domain::Node* node(const std::string& id) const;
  const domain::Allocation* allocation(const std::string& id) const;
  // A node's identity record (null: none was ever written; it outlives the node record).
  const domain::NodeIdentity* node_identity(const std::string& node_id) const;
  const std::map<std::string, domain::NodeIdentity>& node_identities() const { return node_identities_; }
  const std::map<std::string, domain::Volume>& volumes() const { return volumes_; }
  // Each plugin's aggregate, kept from the nodes' instances (state/plugin_aggregates.hpp).
  const std::map<std::string, domain::Plugin>& plugins() const { return plugins_.plugins(); }
  // Plugin rows the load found in an older form (holding every node's instance), or missing, or
  // without an instance left: Batch::rewrite_plugin_rows() writes them as they are kept now.
  std::size_t stale_plugin_rows() const { return stale_plugin_rows_.size(); }
  const std::map<std::string, domain::Node>& nodes() const { return nodes_; }
  const std::map<std::string, domain::Allocation>& allocations() const { return allocations_; }
  // The ids of the allocations placed on a node, terminal ones included (empty when none).
  std::set<std::string> allocation_ids_on(const std::string& node_id) const;
  // Indexes kept at every commit, so the hot paths cost what they return, not the number of
  // allocations (terminal ones stay until the allocation GC):
  // - a node's non-terminal allocations (placement's load, the node's watch, node loss);
  const std::set<std::string>& live_allocation_ids_on(const std::string& node_id) const;
  // - its terminal allocations that a volume's claims still name (the agent may still unmount);
  const std::set<std::string>& claiming_terminal_allocation_ids_on(const std::string& node_id) const;
  // - the highest modify index of its allocations (0 when none), and those modified after `after`;
  std::uint64_t last_allocation_change_on(const std::string& node_id) const;
  std::vector<std::string> allocation_ids_changed_on(const std::string& node_id, std::uint64_t after) const;
  // - the allocations with a name in a namespace (next_alloc_index).
  const std::set<std::string>& allocation_ids_named(const std::string& ns, const std::string& name) const;
  // - the copies of a system group (allocations whose system_id is `group_id`), terminal ones included.
  const std::set<std::string>& allocation_ids_in_group(const std::string& group_id) const;
  // - the keys of the volumes registered for the backend volume `v` names: its external id at its
  //   provider (GetPluginInfo name, so two plugin ids of one driver meet; the plugin id while the
  //   provider is unknown). At most one once registration refuses duplicates; `v` itself included
  //   when it is stored.
  const std::set<std::string>& volume_keys_with_backend(const domain::Volume& v) const;
  const std::deque<domain::Event>& events() const { return events_; }  // oldest first
  // The kept answer of an Idempotency-Key (null when none), and up to `max` keys answered
  // before `before` (oldest first), for trimming.
  const IdempotentRequest* idempotent_request(const std::string& key) const;
  std::vector<std::string> requests_answered_before(domain::Time before, std::size_t max) const;
  // ACL records: policies by name, tokens by AccessorID and by the hash of their SecretID. Once a
  // token was ever written, ACLs count as bootstrapped (deleting every token does not reopen it).
  const std::map<std::string, acl::Policy>& acl_policies() const { return acl_policies_; }
  const std::map<std::string, acl::Token>& acl_tokens() const { return acl_tokens_; }
  const acl::Policy* acl_policy(const std::string& name) const;
  const acl::Token* acl_token(const std::string& accessor_id) const;
  const acl::Token* acl_token_by_secret_hash(const std::string& hash) const;
  bool acl_bootstrapped() const { return acl_bootstrapped_; }
  // The snapshots Mooring took (null when it has no record of this one), keyed by
  // snapshot_record_key; a group's members carry its id.
  const SnapshotRecord* snapshot_record(const std::string& plugin_id, const std::string& id) const;
  const std::map<std::string, SnapshotRecord>& snapshot_records() const { return snapshots_; }
  // Namespace records by name (null: none; "default" exists without one, namespaces/).
  const NamespaceRecord* namespace_record(const std::string& name) const;
  const std::map<std::string, NamespaceRecord>& namespace_records() const { return namespaces_; }

  // ---- writes ----
  // Assigns the next index, stamps create_index (new objects) and modify_index, persists (direct)
  // or queues the write (group commit), applies to memory, and returns the new index. An empty
  // batch writes nothing and returns the current index.
  domain::Expected<std::uint64_t> commit(Batch batch);

  // Returns once every commit up to `index` is durable, or the error that lost it (an index a
  // failed flush lost stays lost). At once when it already is (always, in direct mode).
  // Cancelling the awaiting coroutine throws operation_aborted.
  boost::asio::awaitable<domain::Status> durable(std::uint64_t index) const;
  // For an answer: everything in memory now is durable, and no flush failed since the caller
  // read failed_flushes() at its start (or what it wrote or saw may have been taken back).
  boost::asio::awaitable<domain::Status> durable_since(std::uint64_t failed_flushes) const;
  // For a read's answer: durable_since(), except while read_only() (a degraded leader) or
  // set_reads_from_memory() (an unconfirmed one), when the
  // read is answered from memory at once, also if it was already waiting when the store turned
  // read-only: a flush in flight then is with an etcd that cannot answer, and would hold the read
  // until its deadline. The caller marks such an answer stale (ha/front.cpp). Memory may then
  // still hold the commits of that flush (outcome unknown: they may commit when etcd returns)
  // until it fails and memory goes back to what was last committed.
  boost::asio::awaitable<domain::Status> readable_since(std::uint64_t failed_flushes) const;
  std::uint64_t durable_index() const { return durable_index_; }
  // The index to hand out with an answer built from memory now about table `t`: its table index,
  // or index() while memory runs ahead of the disk (the answer may show a commit whose table
  // index has not moved yet; a client that echoes the index back must not be told "nothing new").
  // Never less than an earlier answer about `t`: once the flush lands, the table's own index may
  // be below the index() handed out meanwhile, and clients (Nomad's among them) take an index
  // that goes back as a reset and read everything again.
  std::uint64_t answer_index(Table t) const;
  std::uint64_t failed_flushes() const { return lost_.size(); }
  // A flush is posted or with the writer thread (tests wait for its answer).
  bool flushing() const { return flush_scheduled_ || flushing_; }

  // ---- watching ----
  // Returns the table's index once it exceeds `after`, or when `timeout` passes, or at once after
  // release_waiters(). Cancelling the awaiting coroutine throws operation_aborted.
  boost::asio::awaitable<std::uint64_t> wait_for_change(Table t, std::uint64_t after,
                                                        std::chrono::steady_clock::duration timeout) const;
  // Shutdown: wakes every waiter and makes later waits return at once.
  void release_waiters();
  bool released() const { return released_; }  // shutting down: long-lived readers end
  std::size_t waiter_count() const;

 private:
  domain::Status install_loaded(domain::Expected<Snapshot> snap);  // load() from what the backend read
  domain::Status reinstall(domain::Expected<Snapshot> snap);       // reload() from what the backend read
  void notify(Table t);
  std::size_t stage_batch(Batch& batch, Transaction& tx) const;                // commit(): its rows, events and tables
  bool stage_plugin_rows(const Batch& batch, Transaction& tx) const;           // stage_batch(): the derived rows
  void install_batch(Batch& batch, std::size_t dropped, std::uint64_t index);  // commit(): into memory
  void install_allocations(std::map<std::string, std::optional<domain::Allocation>>& staged);
  void install_volumes(std::map<std::string, std::optional<domain::Volume>>& staged);
  void rebuild_indexes();
  void index_allocation(const domain::Allocation& a);
  void unindex_allocation(const domain::Allocation& a);
  void index_claims(const domain::Volume& v, bool add);
  void index_backend(const std::string& key, const domain::Volume& v, bool add);
  void refresh_claiming(const std::string& alloc_id);
  void schedule_flush();
  void flush();  // hands the queued commits to the writer thread (posted by schedule_flush)
  void flushed(std::uint64_t last_index, std::map<Table, std::uint64_t> touched, domain::Status st);  // its answer
  void recover(const std::string& error);  // a flush failed: memory back to what is durable
  void wake_durable(const domain::Status& failure);
  struct Waiter;         // a timer a waiting coroutine sleeps on; defined in the .cpp
  struct DurableWaiter;  // the same, for durable()

  boost::asio::any_io_executor executor_;
  StateBackend& backend_;
  StateOptions options_;
  bool ready_ = false;
  bool released_ = false;
  std::uint64_t index_ = 0;
  std::uint64_t incarnation_ = 0;
  std::map<Table, std::uint64_t> table_index_;
  mutable std::map<Table, std::uint64_t> answered_;  // the highest answer_index() of each table
  std::map<std::string, domain::Volume> volumes_;
  PluginAggregates plugins_;  // follows nodes_
  std::set<std::string> stale_plugin_rows_;
  std::map<std::string, domain::Node> nodes_;
  std::map<std::string, domain::Allocation> allocations_;
  struct NodeAllocations {                                      // follows allocations_ and the volumes' claims
    std::set<std::pair<std::uint64_t, std::string>> by_modify;  // (modify index, id): every one
    std::set<std::string> live, claiming_terminal;
  };
  const NodeAllocations& node_allocations(const std::string& node_id) const;
  std::map<std::string, NodeAllocations> allocations_by_node_;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> allocations_by_name_;  // (ns, name)
  std::map<std::string, std::set<std::string>> allocations_by_group_;                         // system_id -> copies
  std::map<std::string, std::size_t> claims_by_allocation_;  // alloc id -> volumes whose claims name it
  std::map<std::pair<std::string, std::string>, std::set<std::string>> volumes_by_backend_;  // (provider, external id)
  std::deque<domain::Event> events_;
  std::deque<std::size_t> event_positions_;
  std::map<std::string, IdempotentRequest> requests_;
  std::set<std::pair<domain::Time, std::string>>
      requests_by_time_;  // position within its commit: with the index, the storage key
  std::map<std::string, acl::Policy> acl_policies_;
  std::map<std::string, acl::Token> acl_tokens_;
  std::map<std::string, domain::NodeIdentity> node_identities_;
  std::map<std::string, std::string> acl_token_by_hash_;  // secret hash -> accessor id
  std::map<std::string, SnapshotRecord> snapshots_;
  std::map<std::string, NamespaceRecord> namespaces_;
  bool acl_bootstrapped_ = false;
  mutable std::map<Table, std::list<Waiter*>> waiters_;  // waiting is a read

  // Group commit: written by the next flush, in index order.
  std::uint64_t durable_index_ = 0;
  std::vector<Transaction> pending_;
  bool flush_scheduled_ = false;
  bool flushing_ = false;   // a flush is with the writer thread; its answer schedules the next
  bool reloading_ = false;  // reload_in_background() has the writer thread
  struct Writer;            // the thread that runs the backend's writes (group commit only)
  std::unique_ptr<Writer> writer_;
  std::optional<std::string> broken_;     // a flush failed and reloading failed too: no more writes
  void release_reads();                   // every readable_since() waiting for a flush answers now
  std::optional<std::string> read_only_;  // set_read_only()
  bool reads_from_memory_ = false;        // set_reads_from_memory()
  struct Lost {                           // the indexes a failed flush took back
    std::uint64_t first = 0, last = 0;
    std::string error;
  };
  std::vector<Lost> lost_;
  mutable std::list<DurableWaiter*> durable_waiters_;  // waiting is a read
  boost::asio::awaitable<domain::Status> wait_durable(std::uint64_t index, bool read) const;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // a posted flush checks it
};

// The backend volume a volume names: (provider, external id). The provider is the plugin's
// GetPluginInfo name, so two plugin ids of one driver meet; "plugin <id>" while it is unknown.
std::pair<std::string, std::string> backend_id(const domain::Volume& v);

// Storage key of an event: its index and position in the commit, zero-padded so keys sort in
// commit order.
std::string event_key(std::uint64_t index, std::size_t position);

}  // namespace mooring::controlplane
