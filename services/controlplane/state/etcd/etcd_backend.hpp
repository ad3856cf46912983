// State room: the etcd StateBackend (issue 22's first floor), selected with
// `--state etcd://host1:2379,host2:2379/prefix`. The state lives under one key prefix of an etcd
// v3 cluster, reached over its gRPC API (proto/etcd/, written from etcd's API reference):
//
//   <prefix>/head                 the index of the last committed transaction
//   <prefix>/log/<index, 20 digits>  committed transactions up to that index (mooring.v1.StateLogEntry:
//                                 one, or consecutive ones of a group commit packed together)
//   <prefix>/snap                 the current snapshot's manifest (mooring.v1.ChunkManifest)
//   <prefix>/stage/...            chunks of snapshots and of entries too large for one request
//
// Every commit is one etcd Txn that puts its log entries and `head` together, guarded by a
// compare on `head`'s mod revision as this backend last wrote or read it. So a write is never
// torn (all of a Txn or none), never applied twice (a replay of the same commit fails the compare)
// and never lost (apply returns only once etcd has committed it, i.e. a quorum has it on disk); a
// second writer on the same prefix fails the compare and is refused with an error naming it (the
// leader election of issue 22 adds its lease key to the same compare). A group commit is split
// into as few Txns as etcd's limits allow (128 operations, 1.5 MiB per request by default: its
// small transactions are packed into entries of up to a request's bytes, so the 128 operations do
// not cap a Txn at 127 of them); a
// failed group may leave a prefix of it committed, which the caller learns by reloading. A
// transaction larger than one request is written as chunks first, then committed by a small
// entry naming them and their SHA-256, so the load can tell a complete set from a torn one.
//
// When a snapshot is due (snapshot_policy.hpp: at least `snapshot_every` transactions and a log
// of at least a quarter of the last snapshot's bytes, or 20 × `snapshot_every` transactions
// whatever their size; every `snapshot_every` until the first) the backend writes the whole state
// as a chunked snapshot, in the background so that commits do not wait for it (~70 MiB at 100,000 volumes, paced puts):
// the writer takes the rows at the last committed index N (a copy-on-write view: the rows are
// kept in buckets shared with the snapshot, and a bucket the writer changes meanwhile is copied
// first), a thread of the backend stages the chunks with its own etcd calls while the writer goes
// on committing N+1..., then one Txn points `snap` at them and deletes the log up to N. That Txn
// is fenced by the leader key and by `snap`'s own mod revision, *not* by `head`, so it never
// conflicts with the writer's commits (which touch only `head` and the log after N); only after
// it commits is etcd's history compacted, so etcd's database stays about the size of the state.
// Every crash point loads: before the Txn, `snap` and the log are untouched and the staged chunks
// are orphans that a later snapshot's delete range removes; after it, the load reads `snap` and
// the log after N. The backend keeps its own copy of the rows for the snapshots (the state's
// size again in memory; docs/high-availability.md says why it is not the store's).
//
// Not thread-safe: the state store calls it from one thread at a time, as it does SQLite (the
// snapshot thread is the backend's own).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/controlplane/state/etcd/etcd_options.hpp"
#include "services/controlplane/state/fenced_backend.hpp"

namespace etcdserverpb {
class TxnRequest;
class TxnResponse;
}  // namespace etcdserverpb
namespace grpc {
class Status;
}  // namespace grpc

namespace mooring::controlplane {

class EtcdBackend final : public FencedBackend {
 public:
  // Connects (the first request fails when no endpoint answers within the timeout); reads nothing yet.
  static domain::Expected<std::unique_ptr<EtcdBackend>> open(EtcdOptions options);
  ~EtcdBackend() override;

  domain::Expected<Snapshot> load() override;
  domain::Status apply(const Transaction& tx) override;
  domain::Status apply_group(std::span<const Transaction> txs) override;
  // A snapshot, then compaction of etcd's history: the replaced values leave etcd's keyspace
  // (its database file frees their pages; `etcdctl defrag` returns them to the disk).
  domain::Status scrub() override { return snapshot_now(); }

  // "etcd://h1:2379,h2:2379/prefix", for logs.
  std::string describe() const;
  // Transactions logged since the current snapshot (tests, status).
  std::uint64_t log_entries() const;
  // Bytes a load reads for them (entries and their chunks), and the current snapshot's (0: none).
  std::uint64_t log_bytes() const { return log_bytes_since_snapshot_; }
  std::uint64_t snapshot_bytes() const { return snapshot_bytes_; }
  // Writes a snapshot now and drops the log it covers (after one in the background, if any).
  domain::Status snapshot_now();
  // Waits for the background snapshot in flight, if any; its outcome (ok when there was none).
  domain::Status wait_snapshot();
  bool snapshot_in_flight() const { return job_ != nullptr; }

  // High availability (state/fenced_backend.hpp): every Txn is fenced by the leader key. A write
  // of unknown outcome needs a reload from etcd; not while a write is with the writer thread.
  void require_fence(std::function<void(const std::string& why)> lost) override;
  void set_fence(LeaderFence fence) override;
  bool needs_reload() const override { return fenced_; }

 private:
  struct Client;
  struct Rows;
  struct SnapshotJob;
  struct Loader;    // one load's reads (etcd_load.cpp)
  struct LogEntry;  // one entry of the log, encoded (apply_group)
  EtcdBackend(EtcdOptions options, std::unique_ptr<Client> client);
  // etcd cannot answer a degraded leader's reload: the last committed copy in memory, writes refused.
  Snapshot last_committed(const std::string& why);
  Snapshot take_loaded(Loader& loader, std::int64_t head_revision);
  // The snapshot of the rows now: in the background, or at once on this thread.
  void start_snapshot();
  domain::Status write_snapshot();
  std::unique_ptr<SnapshotJob> new_job() const;
  // The writer's side of a finished job: its outcome recorded (snap, the log count, or the
  // refusal). `wait`: join it even if still running.
  domain::Status collect_snapshot(bool wait);
  void abandon_snapshot();
  domain::Status finish(SnapshotJob& job);
  domain::Status check_fence();
  // apply_group's steps: the transactions encoded as log entries (a large one staged in chunks),
  // then committed in as few Txns as the limits allow, each moving head along.
  domain::Expected<std::vector<LogEntry>> encode_log(std::span<const Transaction> txs);
  domain::Expected<LogEntry> stage_chunks(std::uint64_t index, const std::string& payload);
  domain::Status commit_log(std::span<const Transaction> txs, const std::vector<LogEntry>& encoded);
  domain::Status commit_txn(etcdserverpb::TxnRequest& request, std::uint64_t first, std::uint64_t last);
  bool snapshot_due() const;
  // A Txn failed its compares: fenced by another writer of `head`, or (when the leader key is
  // no longer ours) by the loss of the leadership. Returns the error to give.
  std::string refused(const etcdserverpb::TxnResponse& response, const std::string& what, const char* key = "head");
  // One commit's Txn, sent again while etcd does not answer (see EtcdOptions::commit_attempt).
  grpc::Status send_commit(const etcdserverpb::TxnRequest& request, etcdserverpb::TxnResponse& response,
                           std::uint64_t first, std::uint64_t last, bool& resent);
  // A refused resend whose earlier send had committed (a leader's only): head's revision;
  // nullopt: truly refused.
  std::optional<std::int64_t> committed_earlier(const etcdserverpb::TxnResponse& response, std::uint64_t last) const;

  EtcdOptions options_;
  std::string where_;  // describe(), built once
  std::unique_ptr<Client> client_;
  std::unique_ptr<Rows> rows_;
  bool loaded_ = false;
  bool fenced_ = false;  // another writer changed `head`: refuse writes until a reload
  bool fence_required_ = false;
  std::optional<LeaderFence> fence_;
  std::function<void(const std::string&)> fence_lost_;
  std::int64_t head_revision_ = 0;  // mod revision of `head` as we last wrote or read it
  std::uint64_t head_index_ = 0;
  std::uint64_t snapshot_index_ = 0;
  std::string snapshot_stage_;  // the current snapshot's chunk prefix
  // Mod revision of `snap` as we last wrote or read it (0: none); -1 after a snapshot Txn of
  // unknown outcome (`uncertain_stage_` its chunks), learnt again by the next snapshot.
  std::int64_t snap_revision_ = 0;
  std::string uncertain_stage_;
  std::uint64_t entries_since_snapshot_ = 0;
  std::uint64_t log_bytes_since_snapshot_ = 0;
  std::uint64_t snapshot_bytes_ = 0;  // the current snapshot's payload (0: none)
  std::unique_ptr<SnapshotJob> job_;  // the background snapshot in flight (its thread joined before we go)
};

}  // namespace mooring::controlplane
