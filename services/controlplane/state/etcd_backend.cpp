#include "services/controlplane/state/etcd_backend.hpp"

#include "services/controlplane/state/etcd_channels.hpp"
#include "services/controlplane/state/snapshot_policy.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "etcd/rpc.grpc.pb.h"
#include "mooring/v1/state_log.pb.h"
#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"
#include "shared/tls/digest.hpp"

namespace mooring::controlplane {
namespace {

namespace pb = ::etcdserverpb;
using domain::error;

const log::Logger kLog{"etcd-state"};

// The smallest key greater than every key that starts with `prefix`.
std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = prefix.back();
    if (static_cast<unsigned char>(last) < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string padded(std::uint64_t n, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llu", width, static_cast<unsigned long long>(n));
  return buf;
}

std::string status_text(const grpc::Status& s) {
  return std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message();
}

}  // namespace

// ---- the connection ----

struct EtcdBackend::Client {
  std::shared_ptr<EtcdChannels> etcd;
  std::chrono::milliseconds timeout;

  template <class Call>
  grpc::Status call(Call&& c) const {
    return etcd->call<pb::KV>(std::forward<Call>(c));
  }

  std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds wait) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + wait);
    ctx->set_wait_for_ready(true);  // ride out a member's restart within the deadline
    return ctx;
  }
  std::unique_ptr<grpc::ClientContext> context() const { return context(timeout); }
  grpc::Status range(const pb::RangeRequest& req, pb::RangeResponse& res) const {
    return call([&](pb::KV::Stub& kv) { return kv.Range(context().get(), req, &res); });
  }
  grpc::Status txn(const pb::TxnRequest& req, pb::TxnResponse& res) const { return txn(req, res, timeout); }
  grpc::Status txn(const pb::TxnRequest& req, pb::TxnResponse& res, std::chrono::milliseconds wait) const {
    return call([&](pb::KV::Stub& kv) { return kv.Txn(context(wait).get(), req, &res); });
  }
  grpc::Status put(const std::string& key, const std::string& value) const {
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    pb::PutResponse res;
    return call([&](pb::KV::Stub& kv) { return kv.Put(context().get(), req, &res); });
  }
  grpc::Status compact(std::int64_t revision) const {
    pb::CompactionRequest req;
    req.set_revision(revision);
    pb::CompactionResponse res;
    return call([&](pb::KV::Stub& kv) { return kv.Compact(context().get(), req, &res); });
  }
};

// The backend's own copy of the rows: what a snapshot writes. Each table's rows are spread over
// buckets by the hash of their key, each bucket shared: a snapshot takes a view (the bucket
// pointers, a few thousand of them whatever the size of the state), and the writer copies a
// bucket it changes while a view still holds it (a few hundred rows at 100,000), never the state.
struct EtcdBackend::Rows {
  static constexpr std::size_t kBuckets = 256;
  using Bucket = std::map<std::string, std::string>;
  std::uint64_t index = 0;
  std::map<Table, std::uint64_t> table_index;
  std::map<Table, std::vector<std::shared_ptr<Bucket>>> rows;  // a view only ever reads its buckets

  static std::size_t bucket_of(const std::string& key) { return std::hash<std::string>{}(key) % kBuckets; }
  // The bucket of `key`, ours alone (copied first if a view shares it).
  Bucket& writable(Table t, const std::string& key) {
    auto& buckets = rows[t];
    if (buckets.empty()) buckets.resize(kBuckets);
    auto& b = buckets[bucket_of(key)];
    if (!b) b = std::make_shared<Bucket>();
    else if (b.use_count() > 1) b = std::make_shared<Bucket>(*b);
    return *b;
  }
  void put(Table t, const std::string& key, std::string value) { writable(t, key)[key] = std::move(value); }
  void erase(Table t, const std::string& key) {
    auto it = rows.find(t);
    if (it == rows.end()) return;
    const auto& b = it->second[bucket_of(key)];
    if (b && b->contains(key)) writable(t, key).erase(key);
  }
  void apply(const Transaction& tx) {
    for (const auto& m : tx.mutations) {
      if (m.value) put(m.table, m.key, *m.value);
      else erase(m.table, m.key);
    }
    for (auto t : tx.tables) table_index[t] = tx.index;
    index = std::max(index, tx.index);
  }
  Snapshot snapshot() const {
    Snapshot out;
    out.index = index;
    out.table_index = table_index;
    for (const auto& [t, buckets] : rows) {
      auto& table = out.rows[t];
      for (const auto& b : buckets)
        if (b) table.insert(b->begin(), b->end());
    }
    return out;
  }
};

namespace {

std::string key_of(const EtcdOptions& o, std::string_view rest) { return o.prefix + "/" + std::string(rest); }
std::string log_key(const EtcdOptions& o, std::uint64_t index) { return key_of(o, "log/" + padded(index, 20)); }

::mooring::v1::StateTransaction to_proto(const Transaction& tx) {
  ::mooring::v1::StateTransaction out;
  out.set_index(tx.index);
  for (const auto& m : tx.mutations) {
    auto* pm = out.add_mutations();
    pm->set_table(std::string(to_string(m.table)));
    pm->set_key(m.key);
    if (m.value) pm->set_value(*m.value);
    else pm->set_deleted(true);
  }
  for (auto t : tx.tables) out.add_tables(std::string(to_string(t)));
  return out;
}

domain::Expected<Transaction> from_proto(const ::mooring::v1::StateTransaction& p) {
  Transaction tx;
  tx.index = p.index();
  for (const auto& m : p.mutations()) {
    auto table = parse_table(m.table());
    if (!table) return error("transaction " + std::to_string(p.index()) + ": unknown table \"" + m.table() + "\"");
    Mutation mu{*table, m.key(), std::nullopt};
    if (!m.deleted()) mu.value = m.value();
    tx.mutations.push_back(std::move(mu));
  }
  for (const auto& t : p.tables()) {
    auto table = parse_table(t);
    if (!table) return error("transaction " + std::to_string(p.index()) + ": unknown table \"" + t + "\"");
    tx.tables.push_back(*table);
  }
  return tx;
}

// A Txn that applies only while `head` is as this writer last saw it (unless nullopt: a snapshot's) and, for a leader, while
// the leader key is the one it created (its fencing). On failure it reads the leader key back, so
// the writer can tell which compare failed.
pb::TxnRequest guarded_txn(const EtcdOptions& o, std::optional<std::int64_t> head_revision,
                           const std::optional<LeaderFence>& fence) {
  pb::TxnRequest req;
  if (head_revision) {
    auto* cmp = req.add_compare();
    cmp->set_key(key_of(o, "head"));
    cmp->set_target(pb::Compare::MOD);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_mod_revision(*head_revision);
  }
  if (fence) {
    auto* created = req.add_compare();
    created->set_key(fence->key);
    created->set_target(pb::Compare::CREATE);
    created->set_result(pb::Compare::EQUAL);
    created->set_create_revision(fence->create_revision);
    auto* value = req.add_compare();
    value->set_key(fence->key);
    value->set_target(pb::Compare::VALUE);
    value->set_result(pb::Compare::EQUAL);
    value->set_value(fence->value);
    req.add_failure()->mutable_request_range()->set_key(fence->key);
  }
  return req;
}

pb::RequestOp put_op(std::string key, std::string value) {
  pb::RequestOp op;
  op.mutable_request_put()->set_key(std::move(key));
  op.mutable_request_put()->set_value(std::move(value));
  return op;
}

pb::RequestOp delete_op(std::string key, std::string range_end) {
  pb::RequestOp op;
  op.mutable_request_delete_range()->set_key(std::move(key));
  op.mutable_request_delete_range()->set_range_end(std::move(range_end));
  return op;
}

}  // namespace

std::string EtcdBackend::describe() const { return where_; }

// ---- open ----

domain::Expected<std::unique_ptr<EtcdBackend>> EtcdBackend::open(EtcdOptions options) {
  auto channels = EtcdChannels::make(options);
  if (!channels) return error(channels.error());
  auto client = std::make_unique<Client>();
  client->etcd = std::move(*channels);
  client->timeout = options.timeout;
  return std::unique_ptr<EtcdBackend>(new EtcdBackend(std::move(options), std::move(client)));
}

EtcdBackend::EtcdBackend(EtcdOptions options, std::unique_ptr<Client> client)
    : options_(std::move(options)),
      where_(to_url(options_)),
      client_(std::move(client)),
      rows_(std::make_unique<Rows>()) {}

EtcdBackend::~EtcdBackend() { abandon_snapshot(); }

std::uint64_t EtcdBackend::log_entries() const { return entries_since_snapshot_; }

// ---- load ----

domain::Expected<Snapshot> EtcdBackend::load() {
  const std::string& where = where_;
  auto fail = [&](const std::string& what) { return error("state in " + where + ": " + what); };

  // A leader reloading after a write of unknown outcome while etcd cannot answer (no quorum):
  // what we know is committed is our own copy, up to the last Txn etcd confirmed. Memory goes
  // back to it, so a degraded leader serves reads without the write in doubt; writes stay
  // refused (fenced_) until a reload from etcd itself, which learns whether it committed.
  auto last_committed = [&](const std::string& why) {
    fenced_ = true;
    kLog.warn("etcd does not answer: the state reloaded from the last committed copy in memory; writes wait for "
              "a reload from etcd", {{"state", where}, {"index", static_cast<int64_t>(head_index_)}, {"error", why}});
    return rows_->snapshot();
  };
  // Our lease ran out by our own clock (the leader is degraded): etcd has not answered for a
  // lease, so do not ask it now. The store reloads on the executor that serves reads, and a Range
  // to an etcd without quorum would hold every read for the request timeout.
  if (fence_required_ && loaded_ && fence_ && fence_->lease_valid && !fence_->lease_valid())
    return last_committed("this leader's lease ran out by its own clock (etcd not answering)");
  // A snapshot being written compacts etcd when it commits, which would fail the reads below
  // (they read at one revision): it stops at its next request, its chunks left for a later one.
  abandon_snapshot();
  // One point in time for every read: the revision the first answer carries.
  pb::RangeRequest head_req;
  head_req.set_key(key_of(options_, "head"));
  pb::RangeResponse head_res;
  if (auto s = client_->range(head_req, head_res); !s.ok()) {
    const bool unreachable =
        s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (unreachable && fence_required_ && loaded_) return last_committed(status_text(s));
    return fail("cannot read head: " + status_text(s));
  }
  const std::int64_t at = head_res.header().revision();
  std::uint64_t head_index = 0;
  std::int64_t head_revision = 0;
  if (head_res.kvs_size() == 1) {
    head_revision = head_res.kvs(0).mod_revision();
    try {
      head_index = std::stoull(head_res.kvs(0).value());
    } catch (const std::exception&) {
      return fail("head is not an index: \"" + head_res.kvs(0).value() + "\"");
    }
  }

  // Every key of [key, end) at `at`, in key order, in pages. A value we write (a log entry, a
  // chunk) is at most one request's payload, so a page of `safe` keys always fits gRPC's receive
  // limit (512 keys of up to 1 MiB each did not: a state of 100,000 volumes did not load). But
  // most log entries are a few hundred bytes, and 31 keys per round trip made a log of 20,000
  // entries take ~5 s to load, a failover's worth. So a page starts at 512 keys and only an
  // answer over the limit (RESOURCE_EXHAUSTED, nothing read) makes the range go on in quarters of
  // that, down to `safe`.
  const auto safe = static_cast<std::int64_t>(
      std::clamp<std::size_t>(EtcdChannels::kMaxReceiveBytes / 2 / std::max<std::size_t>(1, options_.max_request_bytes + 1024), 1, 512));
  auto range_all = [&](const std::string& key, const std::string& end,
                       std::vector<std::pair<std::string, std::string>>& out) -> domain::Status {
    std::string from = key;
    std::int64_t page = 512;
    while (true) {
      pb::RangeRequest req;
      req.set_key(from);
      req.set_range_end(end);
      req.set_revision(at);
      req.set_limit(page);
      // No sort order: etcd returns keys in ascending order anyway, and with one set etcd 3.4
      // reads the whole rest of the range for every page, then sorts and truncates (apply.go) —
      // quadratic: a log of 20,000 entries took 14.8 s to load instead of ~1.
      pb::RangeResponse res;
      if (auto s = client_->range(req, res); !s.ok()) {
        if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && page > safe) {
          page = std::max(safe, page / 4);
          continue;
        }
        return fail("cannot read " + key + ": " + status_text(s));
      }
      for (const auto& kv : res.kvs()) out.emplace_back(kv.key(), kv.value());
      if (!res.more() || res.kvs_size() == 0) return {};
      from = res.kvs(res.kvs_size() - 1).key() + std::string(1, '\0');
    }
  };
  auto read_chunks = [&](const ::mooring::v1::ChunkManifest& m, std::string& payload) -> domain::Status {
    std::vector<std::pair<std::string, std::string>> chunks;
    const std::string stage = key_of(options_, m.stage() + "/");
    if (auto s = range_all(stage, prefix_end(stage), chunks); !s) return s;
    if (chunks.size() != m.chunks()) return fail(m.stage() + ": " + std::to_string(chunks.size()) + " of " +
                                                 std::to_string(m.chunks()) + " chunks present");
    payload.clear();
    for (auto& c : chunks) payload += c.second;
    if (payload.size() != m.bytes() || tls::sha256_hex(payload) != m.sha256())
      return fail(m.stage() + ": chunks do not match their manifest (torn or mixed)");
    return {};
  };

  Rows rows;
  std::string stage_of_snapshot;
  std::uint64_t snapshot_index = 0;
  std::uint64_t snapshot_bytes = 0;
  std::int64_t snap_revision = 0;
  pb::RangeRequest snap_req;
  snap_req.set_key(key_of(options_, "snap"));
  snap_req.set_revision(at);
  pb::RangeResponse snap_res;
  if (auto s = client_->range(snap_req, snap_res); !s.ok()) return fail("cannot read snap: " + status_text(s));
  if (snap_res.kvs_size() == 1) {
    ::mooring::v1::ChunkManifest manifest;
    if (!manifest.ParseFromString(snap_res.kvs(0).value())) return fail("snap: not a manifest");
    std::string payload;
    if (auto s = read_chunks(manifest, payload); !s) return error(s.error());
    ::mooring::v1::StateSnapshot snap;
    if (!snap.ParseFromString(payload)) return fail("snapshot " + manifest.stage() + " does not parse");
    rows.index = snapshot_index = snap.index();
    for (const auto& ti : snap.table_index()) {
      auto t = parse_table(ti.table());
      if (!t) return fail("snapshot: unknown table \"" + ti.table() + "\"");
      rows.table_index[*t] = ti.index();
    }
    for (const auto& r : snap.rows()) {
      auto t = parse_table(r.table());
      if (!t) return fail("snapshot: unknown table \"" + r.table() + "\"");
      rows.put(*t, r.key(), r.value());
    }
    stage_of_snapshot = manifest.stage();
    snapshot_bytes = payload.size();
    snap_revision = snap_res.kvs(0).mod_revision();
  }

  std::vector<std::pair<std::string, std::string>> entries;
  const std::string log_prefix = key_of(options_, "log/");
  if (auto s = range_all(log_key(options_, snapshot_index + 1), prefix_end(log_prefix), entries); !s)
    return error(s.error());
  std::uint64_t last = snapshot_index;
  std::uint64_t transactions = 0;
  std::uint64_t log_bytes = 0;  // as apply_group counts them: each entry, and the chunks it names
  for (const auto& [key, value] : entries) {
    ::mooring::v1::StateLogEntry entry;
    if (!entry.ParseFromString(value)) return fail(key + ": not a log entry");
    log_bytes += value.size();
    ::mooring::v1::StateTransactions ptxs;
    if (entry.has_chunked()) {
      std::string payload;
      if (auto s = read_chunks(entry.chunked(), payload); !s) return error(s.error());
      log_bytes += payload.size();
      if (!ptxs.add_transactions()->ParseFromString(payload)) return fail(key + ": chunked transaction does not parse");
    } else if (entry.has_batch()) {
      ptxs.Swap(entry.mutable_batch());
    } else if (entry.has_transaction()) {
      ptxs.add_transactions()->Swap(entry.mutable_transaction());
    } else {
      return fail(key + ": an empty log entry (written by a newer version?)");
    }
    for (const auto& ptx : ptxs.transactions()) {
      auto tx = from_proto(ptx);
      if (!tx) return fail(tx.error());
      if (tx->index <= last) return fail(key + ": index " + std::to_string(tx->index) + " after " + std::to_string(last));
      rows.apply(*tx);
      last = tx->index;
      ++transactions;
    }
  }
  if (last != std::max(head_index, snapshot_index))
    return fail("the log ends at " + std::to_string(last) + " but head says " + std::to_string(head_index));

  Snapshot out = rows.snapshot();
  *rows_ = std::move(rows);
  head_revision_ = head_revision;
  head_index_ = last;
  snapshot_index_ = snapshot_index;
  snapshot_stage_ = stage_of_snapshot;
  snap_revision_ = snap_revision;
  uncertain_stage_.clear();
  entries_since_snapshot_ = transactions;
  log_bytes_since_snapshot_ = log_bytes;
  snapshot_bytes_ = snapshot_bytes;
  fenced_ = false;
  loaded_ = true;
  kLog.info("state loaded from etcd", {{"state", where}, {"index", static_cast<int64_t>(last)},
                                       {"snapshot_index", static_cast<int64_t>(snapshot_index)},
                                       {"log_entries", static_cast<int64_t>(entries.size())},
                                       {"transactions", static_cast<int64_t>(transactions)}});
  return out;
}

// ---- writes ----

domain::Status EtcdBackend::apply(const Transaction& tx) { return apply_group(std::span<const Transaction>(&tx, 1)); }

domain::Status EtcdBackend::apply_group(std::span<const Transaction> txs) {
  const std::string& where = where_;
  if (!loaded_) return error("state in " + where + ": write before load");
  if (fenced_) return error("state in " + where + ": another writer changed it; reload before writing");
  if (auto st = check_fence(); !st) return st;
  const std::size_t chunk = options_.max_request_bytes;

  // Encode the log entries: consecutive transactions packed into one entry up to a request's
  // bytes (keyed by the last one's index); one transaction too large for a request is staged in
  // chunks now and committed below by a manifest. Chunks nobody commits are deleted by the next
  // snapshot.
  struct Encoded {
    std::uint64_t first = 0, last = 0;  // indexes of its first and last transaction
    std::size_t count = 0;              // transactions in it
    std::string bytes;
    std::size_t staged = 0;             // bytes of the chunks it names (a chunked transaction)
  };
  std::vector<Encoded> encoded;
  ::mooring::v1::StateLogEntry batch;
  std::size_t batch_bytes = 0;
  Encoded pending;
  auto flush = [&] {
    if (pending.count == 0) return;
    if (pending.count == 1) {  // one alone keeps the plain form
      ::mooring::v1::StateLogEntry one;
      one.mutable_transaction()->Swap(batch.mutable_batch()->mutable_transactions(0));
      pending.bytes = one.SerializeAsString();
    } else {
      pending.bytes = batch.SerializeAsString();
    }
    encoded.push_back(std::move(pending));
    pending = {};
    batch.Clear();
    batch_bytes = 0;
  };
  constexpr std::size_t kFraming = 16;  // per packed transaction: tag and length
  for (const auto& tx : txs) {
    auto ptx = to_proto(tx);
    const std::size_t size = ptx.ByteSizeLong() + kFraming;
    if (size + kFraming > chunk) {
      flush();
      const std::string payload = ptx.SerializeAsString();
      ::mooring::v1::ChunkManifest m;
      m.set_stage("stage/log-" + padded(tx.index, 20) + "-" + domain::new_id());
      m.set_bytes(payload.size());
      m.set_sha256(tls::sha256_hex(payload));
      std::uint32_t n = 0;
      for (std::size_t off = 0; off < payload.size(); off += chunk, ++n) {
        if (auto s = client_->put(key_of(options_, m.stage() + "/" + padded(n, 6)), payload.substr(off, chunk)); !s.ok())
          return error("state in " + where + ": staging transaction " + std::to_string(tx.index) + ": " + status_text(s));
      }
      m.set_chunks(n);
      ::mooring::v1::StateLogEntry small;
      *small.mutable_chunked() = m;
      encoded.push_back({tx.index, tx.index, 1, small.SerializeAsString(), payload.size()});
      continue;
    }
    if (batch_bytes + size > chunk) flush();
    if (pending.count == 0) pending.first = tx.index;
    pending.last = tx.index;
    ++pending.count;
    batch_bytes += size;
    *batch.mutable_batch()->add_transactions() = std::move(ptx);
  }
  flush();

  // As few Txns as the limits allow, each guarded by head's revision and moving head along.
  std::size_t i = 0;
  std::size_t applied = 0;  // of txs
  while (i < encoded.size()) {
    pb::TxnRequest req = guarded_txn(options_, head_revision_, fence_);
    std::size_t bytes = 0;
    std::size_t first = i;
    std::size_t count = 0;
    std::size_t logged = 0;  // what a load reads for these entries
    while (i < encoded.size() && req.success_size() + 1 < static_cast<int>(options_.max_txn_ops) &&
           (i == first || bytes + encoded[i].bytes.size() <= chunk)) {
      bytes += encoded[i].bytes.size();
      count += encoded[i].count;
      logged += encoded[i].bytes.size() + encoded[i].staged;
      *req.add_success() = put_op(log_key(options_, encoded[i].last), encoded[i].bytes);
      ++i;
    }
    const std::uint64_t last = encoded[i - 1].last;
    *req.add_success() = put_op(key_of(options_, "head"), std::to_string(last));
    // A refused Txn also reads head back (after the leader key, if fenced): a resend refused
    // because an earlier send of it committed finds our own index there.
    req.add_failure()->mutable_request_range()->set_key(key_of(options_, "head"));
    pb::TxnResponse res;
    bool resent = false;
    const auto s = send_commit(req, res, encoded[first].first, last, resent);
    if (!s.ok()) {
      // Unknown outcome (the commit may have happened): the store reloads to learn it.
      fenced_ = true;
      return error("state in " + where + ": commit of index " + std::to_string(encoded[first].first) + ".." +
                   std::to_string(last) + " failed: " + status_text(s));
    }
    if (!res.succeeded()) {
      if (auto earlier = resent ? committed_earlier(res, last) : std::nullopt) {
        head_revision_ = *earlier;
      } else {
        return error(refused(res, "nothing written from index " + std::to_string(encoded[first].first)));
      }
    } else {
      head_revision_ = res.header().revision();
    }
    head_index_ = last;
    for (std::size_t k = 0; k < count; ++k) rows_->apply(txs[applied++]);
    entries_since_snapshot_ += count;
    log_bytes_since_snapshot_ += logged;
  }

  (void)collect_snapshot(false);  // a failure is logged; a refusal fences the next write
  if (!job_ && !fenced_ && snapshot_due()) start_snapshot();
  return {};
}

bool EtcdBackend::snapshot_due() const {
  const SnapshotPolicy policy{options_.snapshot_every, options_.snapshot_log_fraction, options_.snapshot_max_entries};
  return controlplane::snapshot_due(policy, {entries_since_snapshot_, log_bytes_since_snapshot_, snapshot_bytes_});
}

domain::Status EtcdBackend::snapshot_now() {
  if (!loaded_ || fenced_) return error("state in " + describe() + ": not loaded");
  if (auto st = check_fence(); !st) return st;
  (void)collect_snapshot(true);
  if (fenced_) return error("state in " + describe() + ": the snapshot in the background was refused; reload first");
  return write_snapshot();
}

void EtcdBackend::require_fence(std::function<void(const std::string&)> lost) {
  fence_required_ = true;
  fence_lost_ = std::move(lost);
}

void EtcdBackend::set_fence(LeaderFence fence) { fence_ = std::move(fence); }

domain::Status EtcdBackend::check_fence() {
  if (!fence_required_) return {};
  if (!fence_) return error("state in " + where_ + ": this control plane is a standby; only the leader writes");
  if (fence_->lease_valid && !fence_->lease_valid() && !(fence_->await_lease && fence_->await_lease())) {
    // Nothing is sent. Whether we still lead is for etcd to say: the election asks it and steps
    // down on its answer (lease gone), or leads again (etcd was only unreachable).
    fenced_ = true;
    return error("state in " + where_ + ": not written: the leader lease is not confirmed (etcd has no quorum or "
                 "cannot be reached, or this process was paused)");
  }
  return {};
}

grpc::Status EtcdBackend::send_commit(const pb::TxnRequest& req, pb::TxnResponse& res, std::uint64_t first,
                                      std::uint64_t last, bool& resent) {
  const auto until = std::chrono::steady_clock::now() + options_.timeout;
  auto wait = std::min(options_.commit_attempt, options_.timeout);
  while (true) {
    res.Clear();
    const auto sent = std::chrono::steady_clock::now();
    auto s = client_->txn(req, res, wait);
    const bool unknown = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                         s.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (s.ok() || !unknown || std::chrono::steady_clock::now() >= until) return s;
    kLog.warn("etcd did not answer a commit in time; sending it again (its compare on head makes a second apply "
              "impossible)",
              {{"state", where_}, {"index", std::to_string(first) + ".." + std::to_string(last)},
               {"error", status_text(s)}});
    // Refused at once (UNAVAILABLE: no raft leader yet): not faster than every 100 ms.
    if (std::chrono::steady_clock::now() - sent < std::chrono::milliseconds(100))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return s;
    // Not doubled: a Txn sent while etcd has no raft leader is dropped, not queued, so only the
    // next send after its election commits, and a longer attempt only delays it.
    wait = std::min(options_.commit_attempt, left);
    resent = true;
  }
}

std::optional<std::int64_t> EtcdBackend::committed_earlier(const pb::TxnResponse& res, std::uint64_t last) const {
  // Only for a leader whose key is still ours: then nobody else writes head, and our index there
  // is our own earlier send. Without a fence another writer may have written the same index: the
  // refusal stands (the store reloads and learns what is there).
  if (!fence_) return std::nullopt;
  const std::string head = key_of(options_, "head");
  bool fence_ours = false;
  std::optional<std::int64_t> revision;
  for (const auto& r : res.responses()) {
    if (!r.has_response_range()) continue;
    const auto& range = r.response_range();
    if (fence_ && range.kvs_size() == 1 && range.kvs(0).key() == fence_->key)
      fence_ours = range.kvs(0).create_revision() == fence_->create_revision && range.kvs(0).value() == fence_->value;
    if (range.kvs_size() == 1 && range.kvs(0).key() == head && range.kvs(0).value() == std::to_string(last))
      revision = range.kvs(0).mod_revision();
  }
  if (!fence_ours || !revision) return std::nullopt;
  kLog.info("a commit sent again had committed the first time", {{"state", where_}, {"index", static_cast<int64_t>(last)}});
  return revision;
}

std::string EtcdBackend::refused(const pb::TxnResponse& res, const std::string& what, const char* key) {
  fenced_ = true;
  // With a fence the failure branch read the leader key back first: is it still ours?
  if (fence_ && res.responses_size() >= 1 && res.responses(0).has_response_range()) {
    const auto& range = res.responses(0).response_range();
    const bool ours = range.kvs_size() == 1 && range.kvs(0).create_revision() == fence_->create_revision &&
                      range.kvs(0).value() == fence_->value;
    if (!ours) {
      const std::string why = range.kvs_size() == 0 ? "the leader key is gone (our lease expired)"
                                                    : "another control plane holds the leader key now";
      kLog.error("leadership lost: etcd refused the write", {{"state", where_}, {"reason", why}});
      if (fence_lost_) fence_lost_(why);
      return "state in " + where_ + ": this control plane is no longer the leader (" + why + "); " + what;
    }
  }
  kLog.error("another writer changed the state in etcd: refusing to write",
             {{"state", where_}, {"key", key}, {"expected_head_revision", head_revision_}});
  return "state in " + where_ + ": " + key + " was changed by another writer (another control plane on this prefix?); " + what;
}

// ---- snapshots ----

// One snapshot of the rows at an index: staged and committed by run(), on the backend's snapshot
// thread or on the writer's; the writer reads the outcome once run() returned (finish()).
struct EtcdBackend::SnapshotJob {
  const EtcdOptions* options = nullptr;
  const Client* client = nullptr;
  std::string where;
  Rows view;                 // shares the writer's buckets; dropped by the writer (after the join)
  std::uint64_t entries = 0;  // transactions since the last snapshot that it covers
  std::uint64_t log_bytes = 0;  // and their log's bytes
  std::optional<LeaderFence> fence;
  std::int64_t snap_revision = 0;              // the compare on `snap`; -1: read it first
  std::string current_stage, uncertain_stage;  // of the snapshot `snap` names, of a Txn in doubt
  bool paced = false;             // in the background: pauses between puts (not when the writer waits)
  std::atomic<bool> stop{false};  // load(), the destructor: stop before the next request
  std::atomic<bool> done{false};
  std::thread thread;

  enum class Outcome { committed, failed, uncertain, refused, stopped };
  Outcome outcome = Outcome::failed;
  std::string error;
  std::string stage;                    // its chunks
  std::int64_t committed_revision = 0;  // etcd's revision after its Txn
  pb::TxnResponse refusal;              // the Txn's answer when its compares failed
  std::size_t bytes = 0;
  std::uint32_t chunks = 0;

  bool go_on(EtcdOptions::SnapshotStep step) {
    if (stop.load()) return false;
    return !options->snapshot_step || options->snapshot_step(step);
  }
  void end(Outcome o, std::string why = {}) {
    outcome = o;
    if (!why.empty()) error = "state in " + where + ": snapshot at index " + std::to_string(view.index) + ": " + why;
  }
  std::string encode() const;
  bool learn_snap_revision();
  void run();
};

// The snapshot's bytes. Serialized messages concatenate into their merge, so each bucket is
// encoded alone and appended: no second copy of the state in a message of its own.
std::string EtcdBackend::SnapshotJob::encode() const {
  ::mooring::v1::StateSnapshot head;
  head.set_index(view.index);
  for (const auto& [t, idx] : view.table_index) {
    auto* ti = head.add_table_index();
    ti->set_table(std::string(to_string(t)));
    ti->set_index(idx);
  }
  std::string payload = head.SerializeAsString();
  ::mooring::v1::StateSnapshot part;
  for (const auto& [t, buckets] : view.rows)
    for (const auto& b : buckets) {
      if (!b || b->empty()) continue;
      part.Clear();
      for (const auto& [k, v] : *b) {
        auto* r = part.add_rows();
        r->set_table(std::string(to_string(t)));
        r->set_key(k);
        r->set_value(v);
      }
      payload += part.SerializeAsString();
    }
  return payload;
}

// After a snapshot Txn of unknown outcome: did it commit (`snap` names its chunks), or is `snap`
// still the one before it? Anything else was written by another writer: refused.
bool EtcdBackend::SnapshotJob::learn_snap_revision() {
  pb::RangeRequest req;
  req.set_key(key_of(*options, "snap"));
  pb::RangeResponse res;
  if (auto s = client->range(req, res); !s.ok()) {
    end(Outcome::failed, "cannot read snap: " + status_text(s));
    return false;
  }
  std::string names;
  if (res.kvs_size() == 1) {
    ::mooring::v1::ChunkManifest m;
    if (m.ParseFromString(res.kvs(0).value())) names = m.stage();
  }
  if (names != uncertain_stage && names != current_stage) {
    end(Outcome::failed, "snap names " + (names.empty() ? std::string("nothing") : names) + ", neither " +
                             current_stage + " nor " + uncertain_stage + ": another writer (reload before writing)");
    return false;
  }
  snap_revision = res.kvs_size() == 1 ? res.kvs(0).mod_revision() : 0;
  return true;
}

void EtcdBackend::SnapshotJob::run() {
  using Step = EtcdOptions::SnapshotStep;
  const std::uint64_t index = view.index;
  const std::string payload = encode();
  bytes = payload.size();
  stage = "stage/snap-" + padded(index, 20) + "-" + domain::new_id();
  ::mooring::v1::ChunkManifest m;
  m.set_stage(stage);
  m.set_bytes(payload.size());
  m.set_sha256(tls::sha256_hex(payload));
  // Paced: etcd applies requests in order, so a commit sent while a chunk is being replicated
  // waits for it. Smaller chunks than a request, and a pause as long as each put took, keep
  // etcd free about half the time for the writer's commits (bench/snapshot_stall.cpp).
  const std::size_t chunk = std::min(options->snapshot_chunk_bytes, options->max_request_bytes);
  for (std::size_t off = 0; off < payload.size() || chunks == 0; off += chunk) {
    const auto t0 = std::chrono::steady_clock::now();
    if (auto s = client->put(key_of(*options, stage + "/" + padded(chunks, 6)), payload.substr(off, chunk)); !s.ok())
      return end(Outcome::failed, "staging: " + status_text(s));
    ++chunks;
    if (!go_on(Step::chunk_staged)) return end(Outcome::stopped, "stopped while staging");
    if (paced) {
      const auto pause = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          (std::chrono::steady_clock::now() - t0) * options->snapshot_pause);
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, std::chrono::milliseconds(200)));
    }
  }
  m.set_chunks(chunks);
  if (!go_on(Step::staged)) return end(Outcome::stopped, "stopped before its commit");
  if (snap_revision < 0 && !learn_snap_revision()) return;

  // One Txn: point snap at it, drop the log it covers, the chunks of that log and older
  // snapshots (orphans of snapshots that never committed included). Fenced by the leader key and
  // by `snap` as we last knew it, never by `head`: the writer commits meanwhile.
  pb::TxnRequest req = guarded_txn(*options, std::nullopt, fence);
  auto* cmp = req.add_compare();
  cmp->set_key(key_of(*options, "snap"));
  cmp->set_target(pb::Compare::MOD);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_mod_revision(snap_revision);
  *req.add_success() = put_op(key_of(*options, "snap"), m.SerializeAsString());
  *req.add_success() = delete_op(key_of(*options, "log/"), log_key(*options, index + 1));
  *req.add_success() = delete_op(key_of(*options, "stage/log-"), key_of(*options, "stage/log-" + padded(index + 1, 20)));
  *req.add_success() = delete_op(key_of(*options, "stage/snap-"), key_of(*options, "stage/snap-" + padded(index, 20)));
  // A snapshot at the same index (nothing written since) is outside that range: name it.
  for (const auto* other : {&current_stage, &uncertain_stage})
    if (other->starts_with("stage/snap-" + padded(index, 20))) {
      const std::string old = key_of(*options, *other + "/");
      *req.add_success() = delete_op(old, prefix_end(old));
    }
  pb::TxnResponse res;
  if (auto s = client->txn(req, res); !s.ok()) return end(Outcome::uncertain, "commit: " + status_text(s));
  if (!res.succeeded()) {
    refusal = std::move(res);
    return end(Outcome::refused);
  }
  committed_revision = res.header().revision();
  outcome = Outcome::committed;
  if (!go_on(Step::committed)) return;  // as a crash before the compaction
  // etcd keeps every revision until compacted: drop the history the snapshot made useless.
  if (auto s = client->compact(committed_revision); !s.ok())
    kLog.warn("etcd compaction failed (its history grows until the next snapshot)", {{"state", where}, {"error", status_text(s)}});
}

std::unique_ptr<EtcdBackend::SnapshotJob> EtcdBackend::new_job() const {
  auto job = std::make_unique<SnapshotJob>();
  job->options = &options_;
  job->client = client_.get();
  job->where = where_;
  job->view = *rows_;  // the bucket pointers, not the rows
  job->entries = entries_since_snapshot_;
  job->log_bytes = log_bytes_since_snapshot_;
  job->fence = fence_;
  job->snap_revision = snap_revision_;
  job->current_stage = snapshot_stage_;
  job->uncertain_stage = uncertain_stage_;
  return job;
}

void EtcdBackend::start_snapshot() {
  job_ = new_job();
  job_->paced = true;
  job_->thread = std::thread([job = job_.get()] {
    job->run();
    job->done = true;
  });
}

domain::Status EtcdBackend::collect_snapshot(bool wait) {
  if (!job_ || (!wait && !job_->done.load())) return {};
  if (job_->thread.joinable()) job_->thread.join();
  auto job = std::move(job_);
  return finish(*job);
}

void EtcdBackend::abandon_snapshot() {
  if (!job_) return;
  job_->stop = true;
  (void)collect_snapshot(true);
}

domain::Status EtcdBackend::wait_snapshot() { return collect_snapshot(true); }

domain::Status EtcdBackend::write_snapshot() {
  auto job = new_job();
  job->run();
  return finish(*job);
}

domain::Status EtcdBackend::finish(SnapshotJob& job) {
  using Outcome = SnapshotJob::Outcome;
  const std::uint64_t index = job.view.index;
  switch (job.outcome) {
    case Outcome::committed:
      snapshot_index_ = index;
      snapshot_stage_ = job.stage;
      snap_revision_ = job.committed_revision;
      uncertain_stage_.clear();
      // What was committed while it staged (after its index) stays counted: it is the log now.
      entries_since_snapshot_ -= std::min(job.entries, entries_since_snapshot_);
      log_bytes_since_snapshot_ -= std::min(job.log_bytes, log_bytes_since_snapshot_);
      snapshot_bytes_ = job.bytes;
      kLog.info("state snapshot written to etcd", {{"state", where_}, {"index", static_cast<int64_t>(index)},
                                                   {"bytes", static_cast<int64_t>(job.bytes)},
                                                   {"chunks", static_cast<int64_t>(job.chunks)}});
      return {};
    case Outcome::refused:
      return error(refused(job.refusal, "the snapshot at index " + std::to_string(index) + " was not committed", "snap"));
    case Outcome::uncertain:
      snap_revision_ = -1;  // the next snapshot reads `snap` to learn whether it committed
      uncertain_stage_ = job.stage;
      break;
    case Outcome::failed:
    case Outcome::stopped:
      break;
  }
  kLog.warn("snapshot not written; the log keeps growing until the next one", {{"state", where_}, {"error", job.error}});
  return error(job.error);
}

}  // namespace mooring::controlplane
