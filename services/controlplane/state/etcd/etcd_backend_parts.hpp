// State room, private to the etcd backend: the parts its files share (etcd_backend.cpp: commits;
// etcd_load.cpp: the load; etcd_snapshot.cpp: snapshots in the background). Not part of the
// etcd_backend.hpp surface: only those files include it (it pulls in etcd's gRPC stubs).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "etcd/rpc.grpc.pb.h"
#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/etcd/etcd_channels.hpp"

namespace mooring::controlplane {

namespace etcd_detail {

namespace pb = ::etcdserverpb;

// The smallest key greater than every key that starts with `prefix`.
std::string prefix_end(std::string prefix);
// `n` in decimal, zero-padded to `width` digits (keys that sort by number).
std::string padded(std::uint64_t n, int width);
std::string status_text(const grpc::Status& s);
std::string key_of(const EtcdOptions& o, std::string_view rest);
std::string log_key(const EtcdOptions& o, std::uint64_t index);
// A Txn that applies only while `head` is as this writer last saw it (unless nullopt: a snapshot's) and, for a leader, while
// the leader key is the one it created (its fencing). On failure it reads the leader key back, so
// the writer can tell which compare failed.
pb::TxnRequest guarded_txn(const EtcdOptions& o, std::optional<std::int64_t> head_revision,
                           const std::optional<LeaderFence>& fence);
pb::RequestOp put_op(std::string key, std::string value);
pb::RequestOp delete_op(std::string key, std::string range_end);

}  // namespace etcd_detail

// ---- the connection ----

struct EtcdBackend::Client {
  std::shared_ptr<EtcdChannels> etcd;
  std::chrono::milliseconds timeout;

  template <class Call>
  grpc::Status call(Call&& c) const {
    return etcd->call<::etcdserverpb::KV>(std::forward<Call>(c));
  }

  std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds wait) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + wait);
    ctx->set_wait_for_ready(true);  // ride out a member's restart within the deadline
    return ctx;
  }
  std::unique_ptr<grpc::ClientContext> context() const { return context(timeout); }
  grpc::Status range(const ::etcdserverpb::RangeRequest& req, ::etcdserverpb::RangeResponse& res) const {
    return call([&](::etcdserverpb::KV::Stub& kv) { return kv.Range(context().get(), req, &res); });
  }
  grpc::Status txn(const ::etcdserverpb::TxnRequest& req, ::etcdserverpb::TxnResponse& res) const {
    return txn(req, res, timeout);
  }
  grpc::Status txn(const ::etcdserverpb::TxnRequest& req, ::etcdserverpb::TxnResponse& res,
                   std::chrono::milliseconds wait) const {
    return call([&](::etcdserverpb::KV::Stub& kv) { return kv.Txn(context(wait).get(), req, &res); });
  }
  grpc::Status put(const std::string& key, const std::string& value) const {
    ::etcdserverpb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    ::etcdserverpb::PutResponse res;
    return call([&](::etcdserverpb::KV::Stub& kv) { return kv.Put(context().get(), req, &res); });
  }
  grpc::Status compact(std::int64_t revision) const {
    ::etcdserverpb::CompactionRequest req;
    req.set_revision(revision);
    ::etcdserverpb::CompactionResponse res;
    return call([&](::etcdserverpb::KV::Stub& kv) { return kv.Compact(context().get(), req, &res); });
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
    if (!b)
      b = std::make_shared<Bucket>();
    else if (b.use_count() > 1)
      b = std::make_shared<Bucket>(*b);
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
      if (m.value)
        put(m.table, m.key, *m.value);
      else
        erase(m.table, m.key);
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

// ---- snapshots ----

// One snapshot of the rows at an index: staged and committed by run(), on the backend's snapshot
// thread or on the writer's; the writer reads the outcome once run() returned (finish()).
struct EtcdBackend::SnapshotJob {
  const EtcdOptions* options = nullptr;
  const Client* client = nullptr;
  std::string where;
  Rows view;                    // shares the writer's buckets; dropped by the writer (after the join)
  std::uint64_t entries = 0;    // transactions since the last snapshot that it covers
  std::uint64_t log_bytes = 0;  // and their log's bytes
  std::optional<LeaderFence> fence;
  std::int64_t snap_revision = 0;              // the compare on `snap`; -1: read it first
  std::string current_stage, uncertain_stage;  // of the snapshot `snap` names, of a Txn in doubt
  bool paced = false;                          // in the background: pauses between puts (not when the writer waits)
  std::atomic<bool> stop{false};               // load(), the destructor: stop before the next request
  std::atomic<bool> done{false};
  std::thread thread;

  enum class Outcome { committed, failed, uncertain, refused, stopped };
  Outcome outcome = Outcome::failed;
  std::string error;
  std::string stage;                    // its chunks
  std::int64_t committed_revision = 0;  // etcd's revision after its Txn
  ::etcdserverpb::TxnResponse refusal;  // the Txn's answer when its compares failed
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

}  // namespace mooring::controlplane
