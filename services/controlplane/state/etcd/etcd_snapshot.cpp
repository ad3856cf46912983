// The etcd backend's snapshots (etcd_backend.hpp says what they hold and why they run in the
// background): a job stages the rows at an index as chunks, then one Txn points `snap` at them
// and drops the log they cover; the writer records its outcome.
#include <algorithm>
#include <cstdio>
#include <thread>

#include "mooring/v1/state_log.pb.h"
#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/etcd/etcd_backend_parts.hpp"
#include "services/controlplane/state/etcd/snapshot_policy.hpp"
#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"
#include "shared/tls/digest.hpp"

namespace mooring::controlplane {
namespace {

using namespace etcd_detail;
using domain::error;

const log::Logger kLog{"etcd-state"};

}  // namespace

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
  *req.add_success() =
      delete_op(key_of(*options, "stage/log-"), key_of(*options, "stage/log-" + padded(index + 1, 20)));
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
    kLog.warn("etcd compaction failed (its history grows until the next snapshot)",
              {{"state", where}, {"error", status_text(s)}});
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
      kLog.info("state snapshot written to etcd", {{"state", where_},
                                                   {"index", static_cast<int64_t>(index)},
                                                   {"bytes", static_cast<int64_t>(job.bytes)},
                                                   {"chunks", static_cast<int64_t>(job.chunks)}});
      return {};
    case Outcome::refused:
      return error(
          refused(job.refusal, "the snapshot at index " + std::to_string(index) + " was not committed", "snap"));
    case Outcome::uncertain:
      snap_revision_ = -1;  // the next snapshot reads `snap` to learn whether it committed
      uncertain_stage_ = job.stage;
      break;
    case Outcome::failed:
    case Outcome::stopped: break;
  }
  kLog.warn("snapshot not written; the log keeps growing until the next one",
            {{"state", where_}, {"error", job.error}});
  return error(job.error);
}

}  // namespace mooring::controlplane
