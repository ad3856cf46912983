// State room: when the etcd backend writes its next snapshot (a pure rule, no I/O). A snapshot
// writes the whole state (~70 MiB at 100,000 volumes); the log it replaces may be a few hundred
// KiB. Taken every N transactions whatever their size, a large state is nearly always snapshotting.
// So, once there is a snapshot, one is due only when the log since it is a fair share of it, with
// a cap on entries so the log a load replays stays bounded (docs/high-availability.md).
#pragma once

#include <cstdint>

namespace mooring::controlplane {

struct SnapshotPolicy {
  std::uint64_t every = 1000;     // at least this many transactions since the last snapshot
  double log_fraction = 0.25;     // ... and log bytes since it ≥ this share of its bytes
  std::uint64_t max_entries = 0;  // due at this many transactions whatever their bytes (0: 20 × every)
};

// What the log holds since the current snapshot, and that snapshot's size (0: no snapshot yet).
struct LogSinceSnapshot {
  std::uint64_t entries = 0;         // transactions
  std::uint64_t log_bytes = 0;       // bytes a load reads for them (entries and their chunks)
  std::uint64_t snapshot_bytes = 0;  // the snapshot's payload
};

constexpr std::uint64_t snapshot_cap(const SnapshotPolicy& p) { return p.max_entries ? p.max_entries : 20 * p.every; }

constexpr bool snapshot_due(const SnapshotPolicy& p, const LogSinceSnapshot& log) {
  if (log.entries >= snapshot_cap(p)) return true;
  if (log.entries < p.every) return false;
  if (log.snapshot_bytes == 0) return true;  // a fresh state: the first one every `every`
  return static_cast<double>(log.log_bytes) >= p.log_fraction * static_cast<double>(log.snapshot_bytes);
}

}  // namespace mooring::controlplane
