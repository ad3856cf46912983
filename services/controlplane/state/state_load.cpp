// State room: loading. What the backend read (a Snapshot of rows) decoded into the store's tables,
// in named steps, and installed only when every row decoded; a reload after a failed write or a
// write in doubt (ha/) goes the same way, its indexes moving on, never back.
#include <algorithm>
#include <deque>
#include <random>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/state/state_writer.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/storage_text.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;

namespace {

// Every table, decoded from one Snapshot; nothing of it is installed until all of it decoded.
struct Loaded {
  std::map<std::string, domain::Volume> volumes;
  std::map<std::string, domain::Plugin> plugins;  // the rows: ids and indexes (aggregates follow the nodes)
  std::map<std::string, domain::Node> nodes;
  std::map<std::string, domain::Allocation> allocations;
  std::map<std::string, IdempotentRequest> requests;
  std::map<std::string, acl::Policy> acl_policies;
  std::map<std::string, acl::Token> acl_tokens;
  std::map<std::string, SnapshotRecord> snapshots;
  std::map<std::string, domain::NodeIdentity> identities;
  std::map<std::string, NamespaceRecord> namespaces;
  std::deque<domain::Event> events;
  std::deque<std::size_t> positions;
  std::map<Table, std::uint64_t> table_index;
};

template <class T, class Decode>
domain::Status load_table(const Snapshot& snap, Table t, std::map<std::string, T>& out, Decode decode,
                          std::uint64_t& table_index) {
  auto it = snap.rows.find(t);
  if (it == snap.rows.end()) return {};
  for (const auto& [key, text] : it->second) {
    auto json = nlohmann::json::parse(text, nullptr, false);
    if (json.is_discarded())
      return domain::error("state: " + std::string(to_string(t)) + " row \"" + key + "\" is not valid JSON");
    auto obj = decode(json);
    if (!obj) return domain::error("state: " + std::string(to_string(t)) + " row \"" + key + "\": " + obj.error());
    table_index = std::max(table_index, obj->modify_index);
    out.emplace(key, std::move(*obj));
  }
  return {};
}

// Volumes, plugins, nodes, allocations. A volume row's key is its volume's key (rows from before
// namespaces decode into "default" under the same key); any other key would make two volumes of one.
domain::Status decode_cluster(const Snapshot& snap, Loaded& l) {
  auto& ti = l.table_index;
  if (auto st = load_table(snap, Table::volumes, l.volumes, domain::volume_from_storage, ti[Table::volumes]); !st)
    return st;
  for (const auto& [key, v] : l.volumes)
    if (key != domain::volume_key(v.ns, v.id))
      return domain::error("state: volumes row \"" + key + "\" holds volume \"" + v.id + "\" of namespace \"" + v.ns +
                           "\"");
  if (auto st = load_table(snap, Table::plugins, l.plugins, domain::plugin_from_storage, ti[Table::plugins]); !st)
    return st;
  if (auto st = load_table(snap, Table::nodes, l.nodes, domain::node_from_storage, ti[Table::nodes]); !st) return st;
  return load_table(snap, Table::allocations, l.allocations, domain::allocation_from_storage, ti[Table::allocations]);
}

// Idempotency records, ACL policies and tokens, snapshot records, node identities, namespaces.
domain::Status decode_records(const Snapshot& snap, Loaded& l) {
  auto& ti = l.table_index;
  if (auto it = snap.rows.find(Table::requests); it != snap.rows.end()) {
    for (const auto& [key, text] : it->second) {
      auto r = idempotent_request_from_storage(text);
      if (!r) return domain::error("state: requests row \"" + key + "\": " + r.error());
      ti[Table::requests] = std::max(ti[Table::requests], r->modify_index);
      l.requests.emplace(key, std::move(*r));
    }
  }
  if (auto st =
          load_table(snap, Table::acl_policies, l.acl_policies, acl::policy_from_storage, ti[Table::acl_policies]);
      !st)
    return st;
  if (auto st = load_table(snap, Table::acl_tokens, l.acl_tokens, acl::token_from_storage, ti[Table::acl_tokens]); !st)
    return st;
  if (auto st = load_table(snap, Table::snapshots, l.snapshots, snapshot_record_from_storage, ti[Table::snapshots]);
      !st)
    return st;
  if (auto st = load_table(snap, Table::node_identities, l.identities, domain::node_identity_from_storage,
                           ti[Table::node_identities]);
      !st)
    return st;
  return load_table(snap, Table::namespaces, l.namespaces, namespace_record_from_storage, ti[Table::namespaces]);
}

// Events, in commit order (their keys sort so), each with its position within its commit.
domain::Status decode_events(const Snapshot& snap, Loaded& l) {
  auto it = snap.rows.find(Table::events);
  if (it == snap.rows.end()) return {};
  for (const auto& [key, text] : it->second) {
    auto json = nlohmann::json::parse(text, nullptr, false);
    auto ev = json.is_discarded() ? domain::Expected<domain::Event>(domain::error("not valid JSON"))
                                  : domain::event_from_storage(json);
    if (!ev) return domain::error("state: events row \"" + key + "\": " + ev.error());
    l.table_index[Table::events] = std::max(l.table_index[Table::events], ev->index);
    auto dash = key.rfind('-');
    l.positions.push_back(dash == std::string::npos ? 0 : std::stoull(key.substr(dash + 1)));
    l.events.push_back(std::move(*ev));
  }
  return {};
}

// Plugin rows not as this version writes them: an older form (every node's instance in the
// plugin's row), a row whose plugin no node runs, or a plugin some node runs without a row.
std::set<std::string> find_stale_plugin_rows(const Snapshot& snap, const std::map<std::string, domain::Plugin>& rows,
                                             const PluginAggregates& aggregates) {
  std::set<std::string> out;
  if (auto it = snap.rows.find(Table::plugins); it != snap.rows.end())
    for (const auto& [key, text] : it->second)
      if (!aggregates.find(key) || text != domain::to_storage_text(rows.at(key))) out.insert(key);
  for (const auto& [id, p] : aggregates.plugins())
    if (!rows.contains(id)) out.insert(id);
  return out;
}

// Random, never 0 (an agent's "none") and never the one it replaces.
std::uint64_t new_incarnation(std::uint64_t old) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uint64_t next = 0;
  while (next == 0 || next == old) next = rng();
  return next;
}

}  // namespace

domain::Status StateStore::load() { return install_loaded(backend_.load()); }

domain::Status StateStore::install_loaded(domain::Expected<Snapshot> snap) {
  if (!snap) return domain::error(snap.error());
  Loaded l;
  if (auto st = decode_cluster(*snap, l); !st) return st;
  if (auto st = decode_records(*snap, l); !st) return st;
  if (auto st = decode_events(*snap, l); !st) return st;
  volumes_ = std::move(l.volumes);
  nodes_ = std::move(l.nodes);
  plugins_.rebuild(nodes_, l.plugins);
  stale_plugin_rows_ = find_stale_plugin_rows(*snap, l.plugins, plugins_);
  allocations_ = std::move(l.allocations);
  requests_ = std::move(l.requests);
  acl_policies_ = std::move(l.acl_policies);
  acl_tokens_ = std::move(l.acl_tokens);
  snapshots_ = std::move(l.snapshots);
  node_identities_ = std::move(l.identities);
  namespaces_ = std::move(l.namespaces);
  rebuild_indexes();
  events_ = std::move(l.events);
  event_positions_ = std::move(l.positions);
  table_index_ = std::move(l.table_index);
  answered_.clear();  // another incarnation: its indexes say nothing about those handed out before
  for (const auto& [t, i] : snap->table_index) table_index_[t] = std::max(table_index_[t], i);
  index_ = snap->index;
  for (const auto& [t, i] : table_index_) index_ = std::max(index_, i);
  acl_bootstrapped_ = !acl_tokens_.empty() || this->table_index(Table::acl_tokens) > 0;
  durable_index_ = index_;
  incarnation_ = new_incarnation(incarnation_);
  ready_ = true;
  return {};
}

domain::Status StateStore::reload() { return reinstall(backend_.load()); }

asio::awaitable<domain::Status> StateStore::reload_in_background() {
  // Commits made while the backend is read would be overwritten by what it read: only read-only.
  if (!writer_ || flushing() || !read_only_) co_return reload();
  // The job and its answer share these, not the frame: a cancelled caller leaves them behind.
  struct Job {
    explicit Job(asio::any_io_executor ex) : done(std::move(ex), std::chrono::steady_clock::time_point::max()) {}
    asio::steady_timer done;
    std::optional<domain::Expected<Snapshot>> snap;
  };
  auto job = std::make_shared<Job>(executor_);
  reloading_ = true;
  auto ex = asio::prefer(executor_, asio::execution::outstanding_work.tracked);
  writer_->submit([this, job, ex] {
    domain::Expected<Snapshot> snap = domain::error("state reload threw");
    try {  // as in flush(): a throw must not end the writer thread
      snap = backend_.load();
    } catch (const std::exception& e) {
      snap = domain::error(std::string("state reload threw: ") + e.what());
    }
    asio::post(ex, [job, snap = std::move(snap)]() mutable {
      job->snap = std::move(snap);
      job->done.cancel();
    });
  });
  struct Done {  // however the wait ends, flushes may go to the writer again (after this job)
    bool& reloading;
    ~Done() { reloading = false; }
  } done{reloading_};
  while (!job->snap) {
    auto [ec] = co_await job->done.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none)
      throw boost::system::system_error(asio::error::operation_aborted);
  }
  co_return reinstall(std::move(*job->snap));
}

domain::Status StateStore::reinstall(domain::Expected<Snapshot> snap) {
  const std::uint64_t handed_out = index_;
  if (auto st = install_loaded(std::move(snap)); !st) return st;  // install_loaded() changes nothing unless it succeeds
  broken_.reset();
  // Memory is what is durable again. Indexes move on, never back: watchers re-read, and no cached
  // answer keyed by an index handed out before is reused.
  index_ = std::max(index_, handed_out) + 1;
  durable_index_ = index_;
  for (auto t : kAllTables) {
    table_index_[t] = index_;
    notify(t);
  }
  return {};
}

}  // namespace mooring::controlplane
