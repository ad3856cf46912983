#!/usr/bin/env bash
# Runs the benchmarks (issue 9) against the Release build: `make bench` calls this with
# MOORING_BIN=build/release after building it with -DMOORING_BENCH=ON. Needs root (the hostpath
# plugin bind-mounts), wrk and nginx (scripts/install-deps.sh bench).
# Knobs (environment): MOORING_BENCH_N (lifecycles, default 1000), MOORING_BENCH_CONCURRENCY (8),
# MOORING_BENCH_GC_SIZES ("1000,10000"), MOORING_BENCH_FOOTPRINT_N (100000),
# MOORING_BENCH_WRK_SECONDS (5), MOORING_BENCH_ONLY (e.g. "lifecycle,api"); see bench/README.md.
# Prints a table and writes $MOORING_BIN/bench-results.json and bench/results/latest.json.
# Every process it starts is stopped, and every mount and temp dir under /tmp removed, also on
# failure or Ctrl-C (bench/harness.py).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${MOORING_BIN:?set MOORING_BIN to the Release build dir (make bench does)}"
MOORING_BIN="$(cd "$MOORING_BIN" && pwd)"
export MOORING_BIN

for b in services/controlplane/mooring-controlplane services/nodeagent/mooring-nodeagent \
         plugins/hostpath/mooring-hostpath bench/mooring-bench-grpc bench/mooring-bench-gc bench/mooring-bench-postrun \
         bench/mooring-bench-stream bench/mooring-bench-claims bench/mooring-bench-nodes bench/mooring-bench-snapshot \
         bench/mooring-bench-storage-text; do
  if [ ! -x "$MOORING_BIN/$b" ]; then
    echo "run-bench: $MOORING_BIN/$b is missing; build with -DMOORING_BENCH=ON (make bench)" >&2
    exit 2
  fi
done
for t in wrk nginx python3; do
  command -v "$t" >/dev/null || { echo "run-bench: $t is missing (scripts/install-deps.sh bench)" >&2; exit 2; }
done
if [ "$(id -u)" != 0 ]; then
  echo "run-bench: must run as root: the hostpath plugin bind-mounts volumes" >&2
  exit 2
fi

exec python3 -u bench/run_bench.py
