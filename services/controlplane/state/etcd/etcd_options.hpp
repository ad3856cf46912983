// State room (etcd): where the etcd backend's state lives and how it writes there, parsed from
// `--state etcd://host1:2379,host2:2379/prefix` (etcd_url.cpp) and the --etcd-* TLS files.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/domain/result.hpp"

namespace mooring::controlplane {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // "host:port", tried in order
  std::string prefix = "/mooring";     // no trailing slash
  // TLS to etcd: the CA that signed etcd's certificate and, for client-certificate auth, our
  // certificate and key (PEM files). All empty: plaintext.
  std::string ca_file, cert_file, key_file;
  std::chrono::milliseconds timeout{std::chrono::seconds(5)};  // per request
  // A commit etcd does not answer within this is sent again (its compare on head's revision makes
  // a second apply impossible), the wait doubled up to a second (or this, if longer), until
  // `timeout` in all: etcd drops the proposals in flight when its raft leader dies, and the resend
  // then commits within a second of a new leader's election instead of failing in doubt at `timeout`.
  std::chrono::milliseconds commit_attempt{std::chrono::seconds(1)};
  // One request's payload limit: under etcd's default --max-request-bytes (1.5 MiB) with room
  // for keys and framing. Larger entries and snapshots are chunked.
  std::size_t max_request_bytes = 1024 * 1024;
  std::size_t max_txn_ops = 128;  // etcd's default --max-txn-ops
  // When a snapshot is due (snapshot_policy.hpp): at least `snapshot_every` transactions since the
  // last one and log bytes since it ≥ `snapshot_log_fraction` of its bytes, or
  // `snapshot_max_entries` transactions (0: 20 × snapshot_every). No snapshot yet: every
  // `snapshot_every`.
  std::uint64_t snapshot_every = 1000;
  double snapshot_log_fraction = 0.25;
  std::uint64_t snapshot_max_entries = 0;
  // A snapshot's chunks (at most max_request_bytes), and the pause after each put as a multiple
  // of the time it took: a background snapshot leaves etcd to the commits that much of the time.
  std::size_t snapshot_chunk_bytes = 256 * 1024;
  double snapshot_pause = 1.0;
  // Tests: called on the snapshot's thread at each step of a background snapshot; false stops it
  // there, as a crash would (what it wrote stays, nothing more is written).
  enum class SnapshotStep { chunk_staged, staged, committed };
  std::function<bool(SnapshotStep)> snapshot_step;
};

// "etcd://h1:2379,h2:2379/prefix" (prefix optional: "/mooring"); errors name the part.
domain::Expected<EtcdOptions> parse_etcd_url(std::string_view url);
// The other way, without the TLS files: "etcd://h1:2379,h2:2379/prefix" (logs, describe()).
std::string to_url(const EtcdOptions& options);

}  // namespace mooring::controlplane
