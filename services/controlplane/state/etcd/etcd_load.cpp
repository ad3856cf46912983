// The etcd backend's load: `head`, the snapshot `snap` names and the log after it, every read at
// the one revision the first answer carries, into the backend's own copy of the rows.
#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "etcd/rpc.grpc.pb.h"
#include "mooring/v1/state_log.pb.h"
#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/etcd/etcd_backend_parts.hpp"
#include "services/controlplane/state/etcd/etcd_channels.hpp"
#include "shared/log/log.hpp"
#include "shared/tls/digest.hpp"

namespace mooring::controlplane {

using namespace etcd_detail;
using domain::error;

namespace {

const log::Logger kLog{"etcd-state"};

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

}  // namespace

// One load's reads at revision `at`, and what they found.
struct EtcdBackend::Loader {
  const Client& client;
  const EtcdOptions& options;
  const std::string& where;
  std::int64_t at = 0;

  Rows rows;
  std::string stage_of_snapshot;
  std::uint64_t snapshot_index = 0;
  std::uint64_t snapshot_bytes = 0;
  std::int64_t snap_revision = 0;
  std::uint64_t last = 0;          // the last transaction's index
  std::uint64_t transactions = 0;  // in the log after the snapshot
  std::uint64_t log_bytes = 0;     // as apply_group counts them: each entry, and the chunks it names
  std::size_t entries = 0;

  domain::Error fail(const std::string& what) const { return error("state in " + where + ": " + what); }

  // Every key of [key, end) at `at`, in key order, in pages. A value we write (a log entry, a
  // chunk) is at most one request's payload, so a page of `safe` keys always fits gRPC's receive
  // limit (512 keys of up to 1 MiB each did not: a state of 100,000 volumes did not load). But
  // most log entries are a few hundred bytes, and 31 keys per round trip made a log of 20,000
  // entries take ~5 s to load, a failover's worth. So a page starts at 512 keys and only an
  // answer over the limit (RESOURCE_EXHAUSTED, nothing read) makes the range go on in quarters of
  // that, down to `safe`.
  domain::Status range_all(const std::string& key, const std::string& end,
                           std::vector<std::pair<std::string, std::string>>& out) const {
    const auto safe = static_cast<std::int64_t>(std::clamp<std::size_t>(
        EtcdChannels::kMaxReceiveBytes / 2 / std::max<std::size_t>(1, options.max_request_bytes + 1024), 1, 512));
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
      if (auto s = client.range(req, res); !s.ok()) {
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
  }

  domain::Status read_chunks(const ::mooring::v1::ChunkManifest& m, std::string& payload) const {
    std::vector<std::pair<std::string, std::string>> chunks;
    const std::string stage = key_of(options, m.stage() + "/");
    if (auto s = range_all(stage, prefix_end(stage), chunks); !s) return s;
    if (chunks.size() != m.chunks())
      return fail(m.stage() + ": " + std::to_string(chunks.size()) + " of " + std::to_string(m.chunks()) +
                  " chunks present");
    payload.clear();
    for (auto& c : chunks) payload += c.second;
    if (payload.size() != m.bytes() || tls::sha256_hex(payload) != m.sha256())
      return fail(m.stage() + ": chunks do not match their manifest (torn or mixed)");
    return {};
  }

  // The snapshot `snap` names, if any, into `rows`.
  domain::Status read_snapshot() {
    pb::RangeRequest snap_req;
    snap_req.set_key(key_of(options, "snap"));
    snap_req.set_revision(at);
    pb::RangeResponse snap_res;
    if (auto s = client.range(snap_req, snap_res); !s.ok()) return fail("cannot read snap: " + status_text(s));
    if (snap_res.kvs_size() != 1) return {};
    ::mooring::v1::ChunkManifest manifest;
    if (!manifest.ParseFromString(snap_res.kvs(0).value())) return fail("snap: not a manifest");
    std::string payload;
    if (auto s = read_chunks(manifest, payload); !s) return s;
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
    return {};
  }

  // One log entry's transactions: packed, chunked or single.
  domain::Status entry_transactions(const std::string& key, const std::string& value,
                                    ::mooring::v1::StateTransactions& ptxs) {
    ::mooring::v1::StateLogEntry entry;
    if (!entry.ParseFromString(value)) return fail(key + ": not a log entry");
    log_bytes += value.size();
    if (entry.has_chunked()) {
      std::string payload;
      if (auto s = read_chunks(entry.chunked(), payload); !s) return s;
      log_bytes += payload.size();
      if (!ptxs.add_transactions()->ParseFromString(payload)) return fail(key + ": chunked transaction does not parse");
    } else if (entry.has_batch()) {
      ptxs.Swap(entry.mutable_batch());
    } else if (entry.has_transaction()) {
      ptxs.add_transactions()->Swap(entry.mutable_transaction());
    } else {
      return fail(key + ": an empty log entry (written by a newer version?)");
    }
    return {};
  }

  // The log after the snapshot, applied to `rows` in order.
  domain::Status replay_log() {
    std::vector<std::pair<std::string, std::string>> log;
    const std::string log_prefix = key_of(options, "log/");
    if (auto s = range_all(log_key(options, snapshot_index + 1), prefix_end(log_prefix), log); !s) return s;
    entries = log.size();
    last = snapshot_index;
    for (const auto& [key, value] : log) {
      ::mooring::v1::StateTransactions ptxs;
      if (auto s = entry_transactions(key, value, ptxs); !s) return s;
      for (const auto& ptx : ptxs.transactions()) {
        auto tx = from_proto(ptx);
        if (!tx) return fail(tx.error());
        if (tx->index <= last)
          return fail(key + ": index " + std::to_string(tx->index) + " after " + std::to_string(last));
        rows.apply(*tx);
        last = tx->index;
        ++transactions;
      }
    }
    return {};
  }
};

// A leader reloading after a write of unknown outcome while etcd cannot answer (no quorum):
// what we know is committed is our own copy, up to the last Txn etcd confirmed. Memory goes
// back to it, so a degraded leader serves reads without the write in doubt; writes stay
// refused (fenced_) until a reload from etcd itself, which learns whether it committed.
Snapshot EtcdBackend::last_committed(const std::string& why) {
  fenced_ = true;
  kLog.warn(
      "etcd does not answer: the state reloaded from the last committed copy in memory; writes wait for "
      "a reload from etcd",
      {{"state", where_}, {"index", static_cast<int64_t>(head_index_)}, {"error", why}});
  return rows_->snapshot();
}

domain::Expected<Snapshot> EtcdBackend::load() {
  // Our lease ran out by our own clock (the leader is degraded): etcd has not answered for a
  // lease, so do not ask it now. The store reloads on the executor that serves reads, and a Range
  // to an etcd without quorum would hold every read for the request timeout.
  if (fence_required_ && loaded_ && fence_ && fence_->lease_valid && !fence_->lease_valid())
    return last_committed("this leader's lease ran out by its own clock (etcd not answering)");
  // A snapshot being written compacts etcd when it commits, which would fail the reads below
  // (they read at one revision): it stops at its next request, its chunks left for a later one.
  abandon_snapshot();
  Loader loader{.client = *client_, .options = options_, .where = where_};
  // One point in time for every read: the revision the first answer carries.
  pb::RangeRequest head_req;
  head_req.set_key(key_of(options_, "head"));
  pb::RangeResponse head_res;
  if (auto s = client_->range(head_req, head_res); !s.ok()) {
    const bool unreachable =
        s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (unreachable && fence_required_ && loaded_) return last_committed(status_text(s));
    return loader.fail("cannot read head: " + status_text(s));
  }
  loader.at = head_res.header().revision();
  std::uint64_t head_index = 0;
  std::int64_t head_revision = 0;
  if (head_res.kvs_size() == 1) {
    head_revision = head_res.kvs(0).mod_revision();
    try {
      head_index = std::stoull(head_res.kvs(0).value());
    } catch (const std::exception&) {
      return loader.fail("head is not an index: \"" + head_res.kvs(0).value() + "\"");
    }
  }
  if (auto s = loader.read_snapshot(); !s) return error(s.error());
  if (auto s = loader.replay_log(); !s) return error(s.error());
  if (loader.last != std::max(head_index, loader.snapshot_index))
    return loader.fail("the log ends at " + std::to_string(loader.last) + " but head says " +
                       std::to_string(head_index));
  return take_loaded(loader, head_revision);
}

// What a load read becomes the backend's own copy and bookkeeping.
Snapshot EtcdBackend::take_loaded(Loader& loader, std::int64_t head_revision) {
  Snapshot out = loader.rows.snapshot();
  *rows_ = std::move(loader.rows);
  head_revision_ = head_revision;
  head_index_ = loader.last;
  snapshot_index_ = loader.snapshot_index;
  snapshot_stage_ = loader.stage_of_snapshot;
  snap_revision_ = loader.snap_revision;
  uncertain_stage_.clear();
  entries_since_snapshot_ = loader.transactions;
  log_bytes_since_snapshot_ = loader.log_bytes;
  snapshot_bytes_ = loader.snapshot_bytes;
  fenced_ = false;
  loaded_ = true;
  kLog.info("state loaded from etcd", {{"state", where_},
                                       {"index", static_cast<int64_t>(loader.last)},
                                       {"snapshot_index", static_cast<int64_t>(loader.snapshot_index)},
                                       {"log_entries", static_cast<int64_t>(loader.entries)},
                                       {"transactions", static_cast<int64_t>(loader.transactions)}});
  return out;
}

}  // namespace mooring::controlplane
