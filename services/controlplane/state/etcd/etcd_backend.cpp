#include "services/controlplane/state/etcd/etcd_backend.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "etcd/rpc.grpc.pb.h"
#include "mooring/v1/state_log.pb.h"
#include "services/controlplane/state/etcd/etcd_backend_parts.hpp"
#include "services/controlplane/state/etcd/etcd_channels.hpp"
#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"
#include "shared/tls/digest.hpp"

namespace mooring::controlplane {

namespace etcd_detail {

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

std::string key_of(const EtcdOptions& o, std::string_view rest) { return o.prefix + "/" + std::string(rest); }
std::string log_key(const EtcdOptions& o, std::uint64_t index) { return key_of(o, "log/" + padded(index, 20)); }

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

}  // namespace etcd_detail

namespace {

using namespace etcd_detail;
using domain::error;

const log::Logger kLog{"etcd-state"};

::mooring::v1::StateTransaction to_proto(const Transaction& tx) {
  ::mooring::v1::StateTransaction out;
  out.set_index(tx.index);
  for (const auto& m : tx.mutations) {
    auto* pm = out.add_mutations();
    pm->set_table(std::string(to_string(m.table)));
    pm->set_key(m.key);
    if (m.value)
      pm->set_value(*m.value);
    else
      pm->set_deleted(true);
  }
  for (auto t : tx.tables) out.add_tables(std::string(to_string(t)));
  return out;
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

// ---- writes ----

domain::Status EtcdBackend::apply(const Transaction& tx) { return apply_group(std::span<const Transaction>(&tx, 1)); }

// A log entry as it goes to etcd: consecutive transactions packed up to a request's bytes (keyed
// by the last one's index), or one transaction too large for a request, named by its manifest.
struct EtcdBackend::LogEntry {
  std::uint64_t first = 0, last = 0;  // indexes of its first and last transaction
  std::size_t count = 0;              // transactions in it
  std::string bytes;
  std::size_t staged = 0;  // bytes of the chunks it names (a chunked transaction)
};

domain::Status EtcdBackend::apply_group(std::span<const Transaction> txs) {
  if (!loaded_) return error("state in " + where_ + ": write before load");
  if (fenced_) return error("state in " + where_ + ": another writer changed it; reload before writing");
  if (auto st = check_fence(); !st) return st;
  auto entries = encode_log(txs);
  if (!entries) return error(entries.error());
  if (auto st = commit_log(txs, *entries); !st) return st;
  (void)collect_snapshot(false);  // a failure is logged; a refusal fences the next write
  if (!job_ && !fenced_ && snapshot_due()) start_snapshot();
  return {};
}

// Encodes the log entries: consecutive transactions packed into one entry up to a request's
// bytes; one transaction too large for a request is staged in chunks now (stage_chunks) and
// committed by its manifest. Chunks nobody commits are deleted by the next snapshot.
domain::Expected<std::vector<EtcdBackend::LogEntry>> EtcdBackend::encode_log(std::span<const Transaction> txs) {
  const std::size_t chunk = options_.max_request_bytes;
  std::vector<LogEntry> encoded;
  ::mooring::v1::StateLogEntry batch;
  std::size_t batch_bytes = 0;
  LogEntry pending;
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
      auto staged = stage_chunks(tx.index, ptx.SerializeAsString());
      if (!staged) return domain::error(staged.error());
      encoded.push_back(std::move(*staged));
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
  return encoded;
}

// One transaction's bytes put in chunks under a fresh stage key; the entry is its manifest.
domain::Expected<EtcdBackend::LogEntry> EtcdBackend::stage_chunks(std::uint64_t index, const std::string& payload) {
  const std::size_t chunk = options_.max_request_bytes;
  ::mooring::v1::ChunkManifest m;
  m.set_stage("stage/log-" + padded(index, 20) + "-" + domain::new_id());
  m.set_bytes(payload.size());
  m.set_sha256(tls::sha256_hex(payload));
  std::uint32_t n = 0;
  for (std::size_t off = 0; off < payload.size(); off += chunk, ++n) {
    if (auto s = client_->put(key_of(options_, m.stage() + "/" + padded(n, 6)), payload.substr(off, chunk)); !s.ok())
      return domain::error("state in " + where_ + ": staging transaction " + std::to_string(index) + ": " +
                           status_text(s));
  }
  m.set_chunks(n);
  ::mooring::v1::StateLogEntry small;
  *small.mutable_chunked() = m;
  return LogEntry{index, index, 1, small.SerializeAsString(), payload.size()};
}

// As few Txns as the limits allow, each guarded by head's revision and moving head along; the
// rows in memory follow each Txn that committed.
domain::Status EtcdBackend::commit_log(std::span<const Transaction> txs, const std::vector<LogEntry>& encoded) {
  const std::size_t chunk = options_.max_request_bytes;
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
    if (auto st = commit_txn(req, encoded[first].first, encoded[i - 1].last); !st) return st;
    for (std::size_t k = 0; k < count; ++k) rows_->apply(txs[applied++]);
    entries_since_snapshot_ += count;
    log_bytes_since_snapshot_ += logged;
  }
  return {};
}

// One Txn of log entries `first`..`last`, with head moved to `last`. A refused Txn also reads
// head back (after the leader key, if fenced): a resend refused because an earlier send of it
// committed finds our own index there.
domain::Status EtcdBackend::commit_txn(pb::TxnRequest& req, std::uint64_t first, std::uint64_t last) {
  *req.add_success() = put_op(key_of(options_, "head"), std::to_string(last));
  req.add_failure()->mutable_request_range()->set_key(key_of(options_, "head"));
  pb::TxnResponse res;
  bool resent = false;
  const auto s = send_commit(req, res, first, last, resent);
  if (!s.ok()) {
    // Unknown outcome (the commit may have happened): the store reloads to learn it.
    fenced_ = true;
    return error("state in " + where_ + ": commit of index " + std::to_string(first) + ".." + std::to_string(last) +
                 " failed: " + status_text(s));
  }
  if (!res.succeeded()) {
    auto earlier = resent ? committed_earlier(res, last) : std::nullopt;
    if (!earlier) return error(refused(res, "nothing written from index " + std::to_string(first)));
    head_revision_ = *earlier;
  } else {
    head_revision_ = res.header().revision();
  }
  head_index_ = last;
  return {};
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
    return error("state in " + where_ +
                 ": not written: the leader lease is not confirmed (etcd has no quorum or "
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
    const bool unknown =
        s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || s.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (s.ok() || !unknown || std::chrono::steady_clock::now() >= until) return s;
    kLog.warn(
        "etcd did not answer a commit in time; sending it again (its compare on head makes a second apply "
        "impossible)",
        {{"state", where_}, {"index", std::to_string(first) + ".." + std::to_string(last)}, {"error", status_text(s)}});
    // Refused at once (UNAVAILABLE: no raft leader yet): not faster than every 100 ms.
    if (std::chrono::steady_clock::now() - sent < std::chrono::milliseconds(100))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return s;
    // Doubled up to a second, no further: a Txn sent while etcd has no raft leader is dropped,
    // not queued, so only the next send after its election commits and a longer attempt only
    // delays it; an attempt set shorter than etcd's own latency still grows until one is answered.
    wait = std::min({wait * 2, std::max(options_.commit_attempt, std::chrono::milliseconds(1000)), left});
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
  kLog.info("a commit sent again had committed the first time",
            {{"state", where_}, {"index", static_cast<int64_t>(last)}});
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
  return "state in " + where_ + ": " + key +
         " was changed by another writer (another control plane on this prefix?); " + what;
}

}  // namespace mooring::controlplane
