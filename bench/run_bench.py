#!/usr/bin/env python3
"""Mooring benchmarks (issue 9): real binaries, real plugin processes, real bind mounts.

Every figure is printed beside a reference measured in the same run, as a ratio, and against
its target (MET / MISSED). Prints a table and writes JSON. Driven by scripts/run-bench.sh
(`make bench`). Environment:
  MOORING_BIN                  dir with the Release binaries and bench/ programs (required)
  MOORING_BENCH_N              lifecycles (default 1000)
  MOORING_BENCH_CONCURRENCY    lifecycles / round trips in flight (default 8)
  MOORING_BENCH_SOLO_N         lifecycles then run one at a time (default 200; 0 skips them)
  MOORING_BENCH_GC_SIZES       GC storm sizes (default "1000,10000")
  MOORING_BENCH_FOOTPRINT_N    volumes registered for the control plane footprint (default 100000)
  MOORING_BENCH_WRK_SECONDS    duration of each wrk run (default 5)
  MOORING_BENCH_ONLY           comma list of lifecycle,api,agent,plugins,footprint,gc,metrics,claims,nodes,drain,ha,snapshot,walls (default all)
  MOORING_BENCH_WALLS_N        task starts per run of the walls bench (default 200)
  MOORING_BENCH_WALLS_ROUNDS   its runs of each kind, plain and walled alternating (default 3)
--walls: the walls bench alone (MOORING_BENCH_ONLY=walls): the lifecycle's task floor with and
without a task's walls (issue 41), same run.
  MOORING_BENCH_METRICS_N      lifecycles per round of the metrics on/off comparison (default 300)
  MOORING_BENCH_METRICS_ROUNDS rounds of it, each one stack with --metrics=off then one with it on (default 2)
  MOORING_BENCH_CLAIMS_N       claims of the new-claim storm, on SQLite and on etcd (default 10000)
  MOORING_BENCH_NODES          fleet sizes of the simulated-node bench, e.g. 1000,5000,10000 (default 1000)
  MOORING_BENCH_NODES_WINDOW   its steady window in seconds (default 30)
  MOORING_BENCH_DRAIN_N        migrating allocations (single-writer volumes) of the drain bench (default 10)
  MOORING_BENCH_DRAIN_ROUNDS   its rounds, each a drain and the same moves by hand (default 10)
  MOORING_BENCH_HA_KILLS       leader kills of the failover bench (default 10)
  MOORING_BENCH_HA_LEASE       its --leader-lease in seconds (default 2)
  MOORING_BENCH_SNAPSHOT_ROWS  rows (~700 B, a volume's size) of the snapshot bench's state (default 100000)
  MOORING_BENCH_SNAPSHOT_COMMITS  its commits per pass (default 3000: three snapshots due)
  MOORING_BENCH_INSECURE       1: every bench on the plaintext stack (--insecure --acl=false) only.
                               Default: the stack is secure as `make run` (mutual TLS, HTTPS, ACL
                               token on every request), and lifecycle and api run a second time on
                               the plaintext stack in the same run, for the cost of security
  MOORING_BENCH_COMPARE_N      lifecycles of that plaintext pass (default MOORING_BENCH_N)
  MOORING_BENCH_OUT            JSON output (default $MOORING_BIN/bench-results.json; also
                               copied to bench/results/latest.json, or only-PARTS.json with
                               MOORING_BENCH_ONLY)
"""

import concurrent.futures
import datetime
import itertools
import json
import os
import platform
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drain_handoff  # noqa: E402
import node_fleet  # noqa: E402
from harness import Cluster, EtcdCluster, HaCluster, free_port, now_ms, percentile, read_status, tls_client_context, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("MOORING_BIN", "")
N = int(os.environ.get("MOORING_BENCH_N", "1000"))
C = int(os.environ.get("MOORING_BENCH_CONCURRENCY", "8"))
SOLO_N = int(os.environ.get("MOORING_BENCH_SOLO_N", "200"))
GC_SIZES = [int(x) for x in os.environ.get("MOORING_BENCH_GC_SIZES", "1000,10000").split(",") if x]
FOOTPRINT_N = int(os.environ.get("MOORING_BENCH_FOOTPRINT_N", "100000"))
WRK_SECONDS = int(os.environ.get("MOORING_BENCH_WRK_SECONDS", "5"))
ONLY = set(x for x in os.environ.get("MOORING_BENCH_ONLY", "").split(",") if x)
if "--walls" in sys.argv[1:]:
    ONLY = {"walls"}
WALLS_N = int(os.environ.get("MOORING_BENCH_WALLS_N", "200"))
WALLS_ROUNDS = int(os.environ.get("MOORING_BENCH_WALLS_ROUNDS", "3"))
INSECURE = os.environ.get("MOORING_BENCH_INSECURE", "") == "1"
COMPARE_N = int(os.environ.get("MOORING_BENCH_COMPARE_N", str(N)))
METRICS_N = int(os.environ.get("MOORING_BENCH_METRICS_N", "300"))
METRICS_ROUNDS = int(os.environ.get("MOORING_BENCH_METRICS_ROUNDS", "2"))
CLAIMS_N = int(os.environ.get("MOORING_BENCH_CLAIMS_N", "10000"))
CLAIMS_NODES = 10
HA_KILLS = int(os.environ.get("MOORING_BENCH_HA_KILLS", "10"))
HA_LEASE_S = float(os.environ.get("MOORING_BENCH_HA_LEASE", "2"))
SNAPSHOT_ROWS = int(os.environ.get("MOORING_BENCH_SNAPSHOT_ROWS", "100000"))
SNAPSHOT_COMMITS = int(os.environ.get("MOORING_BENCH_SNAPSHOT_COMMITS", "3000"))

# The pass being measured: "" for the main stack (secure unless MOORING_BENCH_INSECURE=1) whose
# rows carry the targets, "plaintext" for the comparison pass (its rows are labelled and carry none).
PASS = ""

TASK = 'echo ok > "$MOORING_VOLUME_DATA/bench" && exec sleep 600'

rows = []
details = {}
open_clusters = []


def log(msg):
    print(f"bench: {msg}", flush=True)


def wanted(name):
    return not ONLY or name in ONLY


def row(bench, metric, value, unit, ref=None, ref_what="", target=None, note=""):
    """target: ("value", "<=", x) or ("ratio", ">=", x); ratio = value / ref."""
    if PASS:
        metric, target = f"{metric} [{PASS}]", None
    ratio = value / ref if (ref not in (None, 0) and value is not None) else None
    status = "FAILED" if target and value is None else "-"
    if target and value is not None:
        kind, op, x = target
        v = ratio if kind == "ratio" else value
        if v is not None:
            ok = v <= x if op == "<=" else v >= x
            status = "MET" if ok else "MISSED"
    rows.append({"bench": bench, "metric": metric, "value": value, "unit": unit, "reference": ref,
                 "reference_what": ref_what, "ratio": ratio,
                 "target": None if not target else f"{'ratio ' if target[0] == 'ratio' else ''}{target[1]} {target[2]}",
                 "status": status, "note": note})


def dkey(name):
    """The details key of a bench in the current pass."""
    return f"{name}_{PASS}" if PASS else name


def cpu_ms(pid):
    """User + system CPU time of a process so far, ms (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def parallel(fn, items, workers):
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(fn, items))


def run_json(args, stderr_path, timeout=600):
    with open(stderr_path, "ab") as err:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=err, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {p.returncode}; see {stderr_path}")
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


def wait_exit(proc, timeout):
    """Seconds from now until `proc` exits, measured with a pidfd (no polling delay)."""
    t0 = time.perf_counter()
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:
        fd = None
    if fd is not None:
        select.select([fd], [], [], timeout)
        os.close(fd)
    dt = time.perf_counter() - t0
    try:
        proc.p.wait(max(0.0, timeout - dt))
    except subprocess.TimeoutExpired:
        return None
    return dt


def parse_time_ms(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000.0


def keep_logs(d, name):
    """Copies the *.log files of a temp dir to $MOORING_BIN/bench-logs/<name>/ before it goes."""
    dest = os.path.join(BIN, "bench-logs", name)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest, exist_ok=True)
    for f in os.listdir(d):
        if f.endswith(".log") or f.endswith(".jsonl"):
            try:
                shutil.copyfile(os.path.join(d, f), os.path.join(dest, f))
            except OSError:
                pass


def new_cluster(name, secure=None, metrics=True):
    secure = not INSECURE if secure is None else secure
    c = Cluster(BIN, logs_dir=os.path.join(BIN, "bench-logs", name), secure=secure, metrics=metrics)
    open_clusters.append(c)
    return c


def close_cluster(c):
    c.close()
    if c in open_clusters:
        open_clusters.remove(c)


# --------------------------------------------------------------------------------------------
# lifecycle: claim -> publish -> stage -> task -> stop -> unmount -> GC -> freed

CSI_VOLUME_RPCS = ("ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume",
                   "NodeUnstageVolume", "ControllerUnpublishVolume")


def lifecycle_breakdown(c, sample):
    """Where the time goes (p50 over the last lifecycles, ms), from the allocation's task events
    (agent clock) and the control plane's claim events (same machine clock, ms resolution)."""
    steps = {}

    def add(name, a, b):
        if a is not None and b is not None:
            steps.setdefault(name, []).append(b - a)

    for vid, aid, w0, w1, w2, w1s in sample:
        a = c.api.json("GET", f"/v1/allocation/{aid}")
        ev = {}
        for e in a.get("Events", []):
            ev.setdefault(e["Type"], parse_time_ms(e["Time"]))
        st, _, body = c.api.request("GET", f"/v1/events?key={vid}")
        cp = {}
        if st == 200:
            for e in json.loads(body):
                if e.get("Key") == vid and e.get("Time"):
                    cp[e.get("Type")] = parse_time_ms(e["Time"])  # the last lifecycle of the volume
        add("submit -> Claimed (claim, ControllerPublish)", w0, ev.get("Claimed"))
        add("Claimed -> Mounted (NodeStage, NodePublish)", ev.get("Claimed"), ev.get("Mounted"))
        add("Mounted -> Started (task spawned)", ev.get("Mounted"), ev.get("Started"))
        add("Started -> running seen by the client", ev.get("Started"), w1)
        add("stop -> stop answered by the API", w1, w1s)
        add("stop answered -> StopRequested (agent saw it)", w1s, ev.get("StopRequested"))
        add("StopRequested -> Killing (SIGTERM sent)", ev.get("StopRequested"), ev.get("Killing"))
        add("Killing -> Killed (task exited)", ev.get("Killing"), ev.get("Killed"))
        add("Killed -> Released (Postrun)", ev.get("Killed"), ev.get("Released"))
        add("Released -> ClaimNodeDetached (unmount, Unpublish)", ev.get("Released"), cp.get("ClaimNodeDetached"))
        add("ClaimNodeDetached -> ClaimReleased (GC, ControllerUnpublish)", cp.get("ClaimNodeDetached"),
            cp.get("ClaimReleased"))
        add("ClaimReleased -> freed seen by the client", cp.get("ClaimReleased"), w2)
    return {k: percentile(v, 50) for k, v in steps.items()}


def breakdown_drift(timeline):
    """p50 claim-to-mounted and stop-to-freed of the first and the last 100 lifecycles (does the
    cost of one lifecycle grow with the number done before it?)."""
    def p50s(part):
        return {"claim_to_mounted": percentile([t[3] - t[2] for t in part], 50),
                "stop_to_freed": percentile([t[4] - t[3] for t in part], 50)}
    return p50s(timeline[:100]), p50s(timeline[-100:])


def run_lifecycles(c, node, vids, concurrency, prefix):
    """Each volume once through submit -> running -> stop -> freed, `concurrency` at a time.
    Returns (claim-to-mounted ms, stop-to-freed ms, failures, timeline, wall seconds)."""
    to_mounted, to_freed, failures, timeline = [], [], [], []
    lock = threading.Lock()
    counter = itertools.count()

    def worker():
        while True:
            i = next(counter)
            if i >= len(vids):
                return
            vid = vids[i]
            try:
                t0 = time.perf_counter()
                w0 = now_ms()
                aid = c.run_alloc(f"{prefix}-{i}", vid, node, TASK)
                c.wait_alloc_status(aid, ("running",))
                t1 = time.perf_counter()
                w1 = now_ms()
                c.stop_alloc(aid)
                w1s = now_ms()
                c.wait_volume_free(vid)
                t2 = time.perf_counter()
                w2 = now_ms()
                with lock:
                    to_mounted.append((t1 - t0) * 1000)
                    to_freed.append((t2 - t1) * 1000)
                    timeline.append((vid, aid, w0, w1, w2, w1s))
            except Exception as e:  # noqa: BLE001 - a failed lifecycle is counted and reported
                with lock:
                    failures.append(f"{vid}: {e}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return to_mounted, to_freed, failures, timeline, time.perf_counter() - t0


def http_requests_by_route(c):
    """REST requests answered so far, by route, from the control plane's own counter
    (mooring_http_requests_seconds); {} with metrics off."""
    st, _, body = c.api.request("GET", "/v1/metrics")
    out = {}
    if st != 200:
        return out
    for line in body.decode(errors="replace").splitlines():
        m = re.match(r'mooring_http_requests_seconds_count\{(.*)\} (\S+)$', line)
        r = re.search(r'route="([^"]*)"', m.group(1)) if m else None
        if r:
            out[r.group(1)] = out.get(r.group(1), 0) + float(m.group(2))
    return out


def bench_lifecycle(c, node, n=N):
    vids = [f"lv-{i:05d}" for i in range(n)]
    t = time.perf_counter()
    parallel(c.create_volume, vids, 4)
    log(f"lifecycle: created {n} volumes through the hostpath controller in {time.perf_counter() - t:.1f}s")

    pids = {"controlplane": c.cp.pid, "agent": c.nodes[node].pid, "plugin": c.plugin_pid(node)}
    cpu0 = {k: cpu_ms(p) for k, p in pids.items()}
    requests0 = http_requests_by_route(c)
    start_ms = now_ms()
    to_mounted, to_freed, failures, timeline, wall = run_lifecycles(c, node, vids, C, "life")
    end_ms = now_ms()
    cpu1 = {k: cpu_ms(p) for k, p in pids.items()}
    # The client's REST requests per lifecycle: each blocking read that wakes is one more answer.
    requests = {r: (v - requests0.get(r, 0)) / max(1, len(to_freed))
                for r, v in http_requests_by_route(c).items() if r.startswith("/v1/") and r != "/v1/metrics"}
    requests = {r: round(v, 2) for r, v in requests.items() if v > 0}
    log(f"lifecycle: REST requests per lifecycle {sum(requests.values()):.2f} {requests}")
    done = len(to_freed)
    lps = done / wall
    log(f"lifecycle: {done}/{n} lifecycles in {wall:.1f}s at concurrency {C} ({len(failures)} failed)")
    cpu_per = {k: (cpu1[k] - cpu0[k]) / max(1, done) for k in pids
               if cpu0.get(k) is not None and cpu1.get(k) is not None}
    for f in failures[:5]:
        log(f"  failed: {f}")

    breakdown = lifecycle_breakdown(c, timeline[-50:])
    by_claim = sorted(timeline, key=lambda t: t[3] - t[2])
    by_stop = sorted(timeline, key=lambda t: t[4] - t[3])
    tail_claim = lifecycle_breakdown(c, by_claim[-max(1, len(timeline) // 50):])  # the slowest 2%
    tail_stop = lifecycle_breakdown(c, by_stop[-max(1, len(timeline) // 50):])
    first, last = breakdown_drift(timeline)

    # CSI round trips per lifecycle, from the plugin's call log.
    counts = {r: 0 for r in CSI_VOLUME_RPCS}
    for call in c.calls(node):
        if start_ms - 5 <= call.get("unix_ms", 0) <= end_ms + 5 and call.get("rpc") in counts:
            counts[call["rpc"]] += 1
    k = sum(counts.values()) / max(1, done)

    # Reference: plain Probe round trips over the plugin's UNIX socket at the same concurrency.
    sock = c.plugin_socket(node)
    grpc_bin = os.path.join(BIN, "bench", "mooring-bench-grpc")
    err = os.path.join(c.dir, "bench-grpc.log")
    rt_k = run_json([grpc_bin, "--socket", sock, "--calls", str(max(1, round(k * done))), "--concurrency", str(C)], err)
    rt_n = run_json([grpc_bin, "--socket", sock, "--calls", str(max(1, done)), "--concurrency", str(C)], err)
    ceiling_lps = rt_k["per_second"] / k if k else 0
    # Floor of any design with a real task per lifecycle: the same task processes alone.
    task_bin = os.path.join(BIN, "bench", "mooring-bench-task")
    task_alone = run_json([task_bin, "--dir", os.path.join(c.dir, "task-alone"), "--calls", str(max(1, done)),
                           "--concurrency", str(C)], err)

    details[dkey("lifecycle")] = {
        "n": n, "cpu_ms_per_lifecycle": cpu_per, "completed": done, "failed": len(failures), "failures": failures[:20], "concurrency": C,
        "seconds": wall, "lifecycles_per_second": lps,
        "claim_to_mounted_ms": {"p50": percentile(to_mounted, 50), "p99": percentile(to_mounted, 99),
                                "max": max(to_mounted or [0])},
        "stop_to_freed_ms": {"p50": percentile(to_freed, 50), "p99": percentile(to_freed, 99),
                             "max": max(to_freed or [0])},
        "csi_rpcs": counts, "csi_rpcs_per_lifecycle": k, "breakdown_p50_ms": breakdown,
        "http_requests_per_lifecycle": requests,
        "breakdown_slowest_claims_ms": tail_claim, "breakdown_slowest_stops_ms": tail_stop,
        "drift_p50_ms": {"first_100": first, "last_100": last},
        "reference_round_trips_k": rt_k, "reference_round_trips_n": rt_n, "reference_task_alone": task_alone,
    }
    row("lifecycle", f"lifecycles/s (N={n}, c={C})", lps, "/s", ceiling_lps,
        f"{k:.1f} plain gRPC round trips per lifecycle (CSI calls seen by the plugin)",
        ("ratio", ">=", 0.5))
    row("lifecycle", "lifecycles/s vs 1 round trip each", lps, "/s", rt_n["per_second"],
        f"{done} plain gRPC round trips")
    row("lifecycle", "lifecycles/s vs the task alone", lps, "/s", task_alone["per_second"],
        f"{done} task processes alone (posix_spawn of the bench task's shell, which writes its file and exits)")
    # Both references saturate the same CPUs, so their costs add: a lifecycle that only started its
    # task and made its k CSI calls could go no faster than this.
    bound = 1 / (1 / task_alone["per_second"] + k / rt_k["per_second"]) if k and task_alone["per_second"] else 0
    details[dkey("lifecycle")]["task_plus_round_trips_per_second"] = bound
    row("lifecycle", "lifecycles/s vs task + round trips", lps, "/s", bound,
        f"1 / (1/task rate + {k:.1f}/round-trip rate): the task and the CSI calls alone, nothing else "
        f"(half the round-trip ceiling is {ceiling_lps / 2:.0f}/s)")
    rtt50, rtt99 = rt_k["p50_ms"], rt_k["p99_ms"]
    row("lifecycle", "claim-to-mounted p50", percentile(to_mounted, 50), "ms", rtt50 * k,
        f"{k:.1f} x round-trip p50")
    row("lifecycle", "claim-to-mounted p99", percentile(to_mounted, 99), "ms", rtt99 * k,
        f"{k:.1f} x round-trip p99")
    row("lifecycle", "stop-to-freed p50", percentile(to_freed, 50), "ms", rtt50 * k, f"{k:.1f} x round-trip p50")
    row("lifecycle", "stop-to-freed p99", percentile(to_freed, 99), "ms", rtt99 * k, f"{k:.1f} x round-trip p99",
        ("value", "<=", 50))

    # The same lifecycle one at a time: what the design costs when the machine is not saturated
    # (at concurrency 8 the 2 vCPUs are ~80% busy and the difference is queueing).
    if SOLO_N > 0:
        solo = vids[:min(SOLO_N, n)]
        s_mounted, s_freed, s_failures, _, s_wall = run_lifecycles(c, node, solo, 1, "solo")
        log(f"lifecycle: {len(s_freed)}/{len(solo)} lifecycles one at a time in {s_wall:.1f}s "
            f"({len(s_failures)} failed)")
        rt_1 = run_json([grpc_bin, "--socket", sock, "--calls", str(max(1, round(k * len(solo)))),
                         "--concurrency", "1"], err)
        details[dkey("lifecycle")]["one_at_a_time"] = {
            "n": len(solo), "completed": len(s_freed), "failed": len(s_failures), "failures": s_failures[:20],
            "seconds": s_wall,
            "claim_to_mounted_ms": {"p50": percentile(s_mounted, 50), "p99": percentile(s_mounted, 99)},
            "stop_to_freed_ms": {"p50": percentile(s_freed, 50), "p99": percentile(s_freed, 99)},
            "reference_round_trips": rt_1,
        }
        row("lifecycle", "stop-to-freed p99 at c=1", percentile(s_freed, 99), "ms", rt_1["p99_ms"] * k,
            f"{k:.1f} x round-trip p99 at concurrency 1 ({len(solo)} lifecycles one at a time)")
        if s_failures:
            row("lifecycle", "failed lifecycles at c=1", len(s_failures), "", None, "", ("value", "<=", 0))
    if failures:
        row("lifecycle", "failed lifecycles", len(failures), "", None, "", ("value", "<=", 0))
    if "controlplane" in cpu_per and "agent" in cpu_per:
        row("lifecycle", "CPU per lifecycle, control plane + agent", cpu_per["controlplane"] + cpu_per["agent"], "ms",
            cpu_per.get("plugin"), "the plugin's CPU per lifecycle",
            note=f"control plane {cpu_per['controlplane']:.2f} ms, agent {cpu_per['agent']:.2f} ms")
    details[dkey("lifecycle")]["storage_text"] = bench_storage_text(c)


def bench_walls():
    """The lifecycle's task floor with and without the walls (issue 41), same run: mooring-bench-task
    plain (the agent's start without walls: posix_spawn, its own session) and --walls (the agent's
    walled start: as nobody, its own namespaces, root and init), one task at a time, runs alternating.
    CPU per start is the bench process tree's user+system time (its children's rusage)."""
    task_bin = os.path.join(BIN, "bench", "mooring-bench-task")
    d = tempfile.mkdtemp(prefix="mooring-bench-walls-")
    err = os.path.join(d, "bench-task.log")
    runs = {"plain": [], "walls": []}
    try:
        for _ in range(WALLS_ROUNDS):
            for mode in ("plain", "walls"):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                j = run_json([task_bin, "--dir", os.path.join(d, mode), "--calls", str(WALLS_N), "--concurrency", "1"] +
                             (["--walls"] if mode == "walls" else []), err)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                j["cpu_ms_per_start"] = cpu * 1000 / WALLS_N
                runs[mode].append(j)
    finally:
        shutil.rmtree(d, ignore_errors=True)

    def median(mode, key):
        xs = sorted(j[key] for j in runs[mode])
        return xs[len(xs) // 2]

    p50 = {m: median(m, "p50_ms") for m in runs}
    p99 = {m: median(m, "p99_ms") for m in runs}
    cpu = {m: median(m, "cpu_ms_per_start") for m in runs}
    details["walls"] = {"n": WALLS_N, "rounds": WALLS_ROUNDS, "runs": runs}
    each = "; ".join(f"{m} p50 " + ", ".join(f"{j['p50_ms']:.1f}" for j in runs[m]) for m in runs)
    row("walls", "walled task p50 - plain task p50", p50["walls"] - p50["plain"], "ms", p50["plain"],
        "the plain task's p50 (posix_spawn, its own session)", ("value", "<=", 5),
        f"medians of {WALLS_ROUNDS} runs of {WALLS_N} starts each; {each}")
    row("walls", "walled task p99", p99["walls"], "ms", p99["plain"], "the plain task's p99")
    row("walls", "CPU per walled task", cpu["walls"], "ms", cpu["plain"], "CPU per plain task")


def bench_storage_text(c):
    """mooring-bench-storage-text: what the control plane's io thread spends rendering an allocation
    (its task, 50 events) to its storage text at each commit, beside the nlohmann DOM dump it replaced."""
    r = run_json([os.path.join(BIN, "bench", "mooring-bench-storage-text")], os.path.join(c.dir, "bench-storage-text.log"))
    big = next(x for x in r if x["events"] == 50)
    row("lifecycle", "render an allocation with 50 events to its storage text (p50)", big["text_p50_ns"] / 1000, "us",
        big["dom_p50_ns"] / 1000, "the same text through the nlohmann DOM and dump() (p50, rounds alternating)",
        note=", ".join(f"{x['events']} events: {x['text_p50_ns'] / 1000:.1f} vs {x['dom_p50_ns'] / 1000:.1f} us"
                       for x in r) + f"; {big['bytes']} bytes")
    return r


# --------------------------------------------------------------------------------------------
# API: wrk against the control plane and against nginx serving the same bytes

def wrk(url, seconds, token=None):
    auth = ["-H", f"X-Mooring-Token: {token}"] if token else []
    p = subprocess.run(["wrk", "-t1", "-c16", f"-d{seconds}s", "--latency", *auth, url], capture_output=True,
                       text=True, timeout=seconds + 60)
    out = p.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def lat(pct):
        m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return None
        v = float(m.group(1))
        return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v

    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errs = re.search(r"Socket errors:.*", out)
    return {"rps": rps, "p50_ms": lat(50), "p99_ms": lat(99), "non_2xx": int(bad.group(1)) if bad else 0,
            "socket_errors": errs.group(0) if errs else "", "raw": out}


def bench_api(c, one_vid):
    # A list of exactly 1000 volumes: top up with registered volumes if the lifecycle made fewer.
    have = len(c.api.json("GET", "/v1/volumes"))
    if have < 1000:
        vols = [{"ID": f"av-{i:05d}", "Name": f"av-{i:05d}", "PluginID": "hostpath", "ExternalID": f"ext-av-{i:05d}",
                 "RequestedCapabilities": [{"AccessMode": "single-node-writer", "AttachmentMode": "file-system"}]}
                for i in range(1000 - have)]
        c.api.json("PUT", "/v1/volumes", {"Volumes": vols})
    st, hdr, list_body = c.api.request("GET", "/v1/volumes")
    st2, hdr2, one_body = c.api.request("GET", f"/v1/volume/csi/{one_vid}")
    if st != 200 or st2 != 200:
        raise RuntimeError(f"GET /v1/volumes: {st}; GET /v1/volume/csi/{one_vid}: {st2}")
    count = len(json.loads(list_body))
    ndir = tempfile.mkdtemp(prefix="mooring-bench-nginx-", dir="/tmp")
    nginx = None
    try:
        os.chmod(ndir, 0o755)
        for name, body in (("volumes.json", list_body), ("volume.json", one_body)):
            with open(os.path.join(ndir, name), "wb") as f:
                f.write(body)
            os.chmod(os.path.join(ndir, name), 0o644)
        port = free_port()
        # Over HTTPS when the stack is: the same certificate and key as the control plane's.
        listen = (f"listen 127.0.0.1:{port} ssl; ssl_certificate {c.tls_file('server.pem')}; "
                  f"ssl_certificate_key {c.tls_file('server-key.pem')}; ssl_protocols TLSv1.2 TLSv1.3;") \
            if c.secure else f"listen 127.0.0.1:{port};"
        temps = " ".join(f"{k}_temp_path {ndir}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = f"""
worker_processes 1;
daemon off;
pid {ndir}/nginx.pid;
error_log {ndir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  sendfile on;
  {temps}
  server {{
    {listen}
    location = /v1/volumes {{ default_type application/json; alias {ndir}/volumes.json; }}
    location = /v1/volume/csi/{one_vid} {{ default_type application/json; alias {ndir}/volume.json; }}
  }}
}}
"""
        with open(os.path.join(ndir, "nginx.conf"), "w") as f:
            f.write(conf)
        nginx = subprocess.Popen(["nginx", "-p", ndir, "-c", os.path.join(ndir, "nginx.conf")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

        def nginx_up():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return True
            except OSError:
                return False

        if not wait_until(nginx_up, 10):
            raise RuntimeError("nginx did not start: " + open(os.path.join(ndir, "error.log")).read())
        mooring = f"{c.scheme}://127.0.0.1:{c.http_port}"
        ref = f"{c.scheme}://127.0.0.1:{port}"
        ctx = tls_client_context(c.ca_file) if c.secure else None
        out = {"list_volumes": count, "list_bytes": len(list_body), "one_bytes": len(one_body)}
        for key, path in (("list", "/v1/volumes"), ("one", f"/v1/volume/csi/{one_vid}")):
            # a sanity check that both serve the same bytes
            if urllib.request.urlopen(ref + path, context=ctx).read() != (list_body if key == "list" else one_body):
                raise RuntimeError("nginx does not serve the saved bytes")
            wrk(mooring + path, 1, c.token)  # warm-up
            m = wrk(mooring + path, WRK_SECONDS, c.token)
            wrk(ref + path, 1)
            r = wrk(ref + path, WRK_SECONDS)
            out[key] = {"mooring": {k: v for k, v in m.items() if k != "raw"},
                        "nginx": {k: v for k, v in r.items() if k != "raw"}}
            label = f"GET /v1/volumes ({count} volumes, {len(list_body) // 1024} KiB)" if key == "list" \
                else f"GET /v1/volume/csi/:id ({len(one_body)} B)"
            note = "" if not m["non_2xx"] and not m["socket_errors"] else f"non-2xx {m['non_2xx']} {m['socket_errors']}"
            over = "over HTTPS, same certificate" if c.secure else "plain HTTP"
            row("api", label + " req/s", m["rps"], "/s", r["rps"], f"nginx, same bytes, {over}, wrk -t1 -c16",
                ("ratio", ">=", 0.5), note)
            row("api", label.split(" (")[0] + " p99", m["p99_ms"], "ms", r["p99_ms"], "nginx p99")
        details[dkey("api")] = out
    finally:
        if nginx:
            nginx.send_signal(signal.SIGQUIT)
            try:
                nginx.wait(10)
            except subprocess.TimeoutExpired:
                nginx.kill()
        shutil.rmtree(ndir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# node agent: idle footprint, 200 mounted volumes, recovery, Postrun and shutdown latency

def rss(pid):
    s = read_status(pid) or {}
    return s.get("VmRSS"), s.get("VmHWM")


def smaps_rollup(pid):
    """MiB from /proc/<pid>/smaps_rollup: Pss, anonymous memory (heap, stacks, copied-on-write
    pages), private (Private_Clean + Private_Dirty), and the file-backed shared part of RSS (library
    text that other processes map too). RSS minus anonymous is the file-backed part: code and
    read-only data pages, which the kernel maps 64 KiB around each page a fault touches."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    out[parts[0][:-1]] = int(parts[1]) / 1024.0
    except OSError:
        return None
    return {"pss_mib": out.get("Pss", 0.0), "anon_mib": out.get("Anonymous", 0.0),
            "private_mib": out.get("Private_Clean", 0.0) + out.get("Private_Dirty", 0.0),
            "shared_mib": out.get("Shared_Clean", 0.0) + out.get("Shared_Dirty", 0.0)}


def released_delta(c, aid, timeout=20):
    """ms from the allocation's Killed event to its Released event (Postrun, ms resolution)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        a = c.api.json("GET", f"/v1/allocation/{aid}")
        ev = {e["Type"]: parse_time_ms(e["Time"]) for e in a.get("Events", []) if e.get("Time")}
        if "Released" in ev and "Killed" in ev:
            return ev["Released"] - ev["Killed"]
        time.sleep(0.05)
    return None


def bench_postrun_inprocess(c):
    """mooring-bench-postrun: VolumeManager::release and shutdown with microsecond clocks."""
    d = os.path.join(c.dir, "postrun")
    r = run_json([os.path.join(BIN, "bench", "mooring-bench-postrun"), "--dir", d, "--n", "100"],
                 os.path.join(c.dir, "bench-postrun.log"))
    ref = r["reference_durable_write"]
    for mode in ("frozen", "killed"):
        rel = r[mode]["release"]
        row("agent", f"Postrun in process (VolumeManager::release), plugin {mode}, max of {rel['n']}",
            rel["max_us"] / 1000, "ms", ref["max_us"] / 1000, "one durable file write, slot rewritten in place (max)", ("value", "<=", 5),
            f"p50 {rel['p50_us'] / 1000:.2f} ms")
    row("agent", "volume manager shutdown, 100 releases hung on a frozen plugin", r["frozen"]["shutdown_us"] / 1000,
        "ms", r["killed"]["shutdown_us"] / 1000, "same, plugin killed", ("value", "<=", 100),
        "the agent-side part of shutdown, in process")
    return r


def bench_operation_record(c):
    """mooring-bench-opcache: what the durable operation cache adds to one controller call."""
    r = run_json([os.path.join(BIN, "bench", "mooring-bench-opcache"), "--dir", os.path.join(c.dir, "opcache"),
                  "--n", "500"], os.path.join(c.dir, "bench-opcache.log"))
    mem, dur = r["memory"], r["durable"]
    row("agent", f"controller call through the durable operation cache (intent + result fdatasync), p50 of {dur['n']}",
        dur["p50_us"] / 1000, "ms", mem["p50_us"] / 1000, "the same calls through the in-memory cache (p50)",
        note=f"p99 {dur['p99_us'] / 1000:.2f} ms (in memory {mem['p99_us'] / 1000:.3f} ms); controller calls only, "
             "node calls do not pass the cache")
    return r


def bench_agent(c, node, agent_idle):
    out = {"idle": agent_idle}
    out["postrun_inprocess"] = bench_postrun_inprocess(c)
    out["operation_record"] = bench_operation_record(c)
    # ---- 200 mounted volumes ----
    vids = [f"mv-{i:03d}" for i in range(200)]
    parallel(c.create_volume, vids, 4)

    def hold(i):
        aid = c.run_alloc(f"hold-{i}", vids[i], node)
        c.wait_alloc_status(aid, ("running",))
        return aid

    aids = parallel(hold, range(200), C)
    time.sleep(1.0)
    agent_rss, agent_hwm = rss(c.nodes[node].pid)
    mounts = len([m for m in c.mounts_below() if c.node_dir(node) in m])
    out["mounted_200"] = {"agent_rss_mib": agent_rss, "agent_hwm_mib": agent_hwm, "mounts": mounts}
    row("agent", "node agent RSS, 200 mounted volumes", agent_rss, "MiB", agent_idle["agent_rss_mib"],
        "same agent idle", note=f"{mounts} mounts")

    # ---- recovery ----
    # Reference: 100 releases with a healthy plugin, from the first NodeUnpublish to the last NodeUnstage.
    batch_a, batch_b = aids[:100], aids[100:]
    t_a = now_ms()
    parallel(c.stop_alloc, batch_a, C)
    parallel(lambda v: c.wait_volume_free(v, 60), vids[:100], C)
    calls = [x for x in c.calls(node) if x.get("unix_ms", 0) >= t_a and x.get("code_name") == "OK"]
    first = min(x["unix_ms"] - x.get("duration_ms", 0) for x in calls if x["rpc"] == "NodeUnpublishVolume")
    last = max(x["unix_ms"] for x in calls if x["rpc"] == "NodeUnstageVolume")
    ref_span = last - first

    # Measured: the plugin fails everything (unhealthy), 100 allocations stop, their unmounts
    # retry; then the plugin heals. From its first good Probe to the last NodeUnstage.
    c.set_faults(node, [{"rpc": "*", "code": 14, "message": "bench: plugin down"}])
    if not wait_until(lambda: not c.node_healthy(node), 30, 0.1):
        raise RuntimeError("plugin never reported unhealthy under the fault")
    parallel(c.stop_alloc, batch_b, C)
    time.sleep(3.0)  # the unmounts fail and back off meanwhile
    pending = len([m for m in c.mounts_below() if c.node_dir(node) in m])
    t_clear = now_ms()
    c.set_faults(node, [])
    parallel(lambda v: c.wait_volume_free(v, 120), vids[100:], C)
    t_freed = now_ms()
    calls = [x for x in c.calls(node) if x.get("unix_ms", 0) >= t_clear and x.get("code_name") == "OK"]
    healthy = min(x["unix_ms"] for x in calls if x["rpc"] == "Probe")
    unstages = [x["unix_ms"] for x in calls if x["rpc"] == "NodeUnstageVolume"]
    recovery = max(unstages) - healthy
    first_unmount = min(x["unix_ms"] - x.get("duration_ms", 0) for x in calls if x["rpc"] == "NodeUnpublishVolume")
    out["recovery"] = {"pending_mounts": pending, "unstaged": len(unstages), "first_ok_probe_after_clear_ms":
                       healthy - t_clear, "healthy_to_unmounted_ms": recovery,
                       "clear_to_unmounted_ms": max(unstages) - t_clear, "clear_to_freed_ms": t_freed - t_clear,
                       "reference_healthy_span_ms": ref_span, "healthy_to_first_unmount_ms": first_unmount - healthy}
    row("agent", "recovery: plugin healthy -> 100 pending unmounts done", recovery, "ms", ref_span,
        "same 100 unmounts, healthy plugin", ("value", "<=", 1000),
        f"{len(unstages)} unstaged; fault cleared -> freed {t_freed - t_clear:.0f} ms")
    row("agent", "recovery: plugin healthy -> first pending unmount starts", first_unmount - healthy, "ms", None, "",
        None, "the wake-up alone; the rest is unmount work (compare the healthy reference)")

    # ---- Postrun and shutdown with the plugin frozen (SIGSTOP: it accepts nothing) ----
    # Reference shutdown: an idle agent with a healthy plugin.
    c.start_node("n2")
    ref_shutdown = None
    c.nodes["n2"].signal(signal.SIGTERM)
    ref_shutdown = wait_exit(c.nodes["n2"], 30)

    task_aids = []

    def run_task(i):
        aid = c.run_alloc(f"task-{i}", vids[i], node, TASK)
        c.wait_alloc_status(aid, ("running",))
        return aid

    # Reference Postrun: the same with a healthy plugin (volumes 40..59).
    healthy_aids = parallel(run_task, range(40, 60), C)
    parallel(c.stop_alloc, healthy_aids, C)
    hdeltas = [d for d in parallel(lambda a: released_delta(c, a), healthy_aids, C) if d is not None]
    parallel(lambda v: c.wait_volume_free(v, 60), vids[40:60], C)

    task_aids = parallel(run_task, range(20), C)
    ppid = c.plugin_pid(node)
    os.kill(ppid, signal.SIGSTOP)
    try:
        parallel(c.stop_alloc, task_aids, C)
        deltas = [d for d in parallel(lambda a: released_delta(c, a), task_aids, C) if d is not None]
        c.nodes[node].signal(signal.SIGTERM)
        frozen_shutdown = wait_exit(c.nodes[node], 60)
    finally:
        try:
            os.kill(ppid, signal.SIGCONT)
        except OSError:
            pass
    out["postrun_frozen_ms"] = {"n": len(deltas), "p50": percentile(deltas, 50), "max": max(deltas or [0])}
    out["shutdown"] = {"healthy_idle_s": ref_shutdown, "frozen_plugin_20_pending_s": frozen_shutdown}

    # ---- the same with the plugin killed (gone) on a fresh node ----
    c.start_node("n3")
    killed_aids = parallel(lambda i: (lambda a: (c.wait_alloc_status(a, ("running",)), a)[1])(
        c.run_alloc(f"kill-{i}", vids[20 + i], "n3", TASK)), range(20), C)
    os.kill(c.plugin_pid("n3"), signal.SIGKILL)
    parallel(c.stop_alloc, killed_aids, C)
    kdeltas = [d for d in parallel(lambda a: released_delta(c, a), killed_aids, C) if d is not None]
    pid = c.plugin_pid("n3")
    if pid:  # restarted meanwhile: kill it again so shutdown meets a dead plugin
        os.kill(pid, signal.SIGKILL)
    c.nodes["n3"].signal(signal.SIGTERM)
    killed_shutdown = wait_exit(c.nodes["n3"], 60)
    out["postrun_killed_ms"] = {"n": len(kdeltas), "p50": percentile(kdeltas, 50), "max": max(kdeltas or [0])}
    out["shutdown"]["killed_plugin_pending_s"] = killed_shutdown
    details["agent"] = out

    up_to = "upper bound: Killed->Released task events (ms resolution) also hold the alloc status save before Postrun"
    href = max(hdeltas) if hdeltas else None
    out["postrun_healthy_ms"] = {"n": len(hdeltas), "p50": percentile(hdeltas, 50), "max": href}
    row("agent", f"Postrun in the agent process, plugin frozen (max of {len(deltas)})", max(deltas) if deltas else None, "ms", href,
        "max with a healthy plugin", ("value", "<=", 5), f"p50 {percentile(deltas, 50):.0f} ms; {up_to}")
    row("agent", f"Postrun in the agent process, plugin killed (max of {len(kdeltas)})", max(kdeltas) if kdeltas else None, "ms", href,
        "max with a healthy plugin", ("value", "<=", 5), f"p50 {percentile(kdeltas, 50):.0f} ms; {up_to}")
    row("agent", "agent shutdown, plugin frozen, 20 unmounts pending",
        frozen_shutdown * 1000 if frozen_shutdown is not None else None, "ms",
        ref_shutdown * 1000 if ref_shutdown else None, "idle agent, healthy plugin", ("value", "<=", 100))
    row("agent", "agent shutdown, plugin killed, unmounts pending",
        killed_shutdown * 1000 if killed_shutdown is not None else None, "ms",
        ref_shutdown * 1000 if ref_shutdown else None, "idle agent, healthy plugin", ("value", "<=", 100))


# --------------------------------------------------------------------------------------------
# ha: failover of the control plane on a three-member etcd (issue 22)

open_etcds = []


def new_etcd(d):
    e = EtcdCluster(d)
    open_etcds.append(e)
    return e


def close_etcd(e):
    e.close()
    if e in open_etcds:
        open_etcds.remove(e)


def bench_ha_failover():
    """HA_KILLS times: kill -9 of the leading control plane, then a write (PUT /v1/acl/policy/...,
    a Raft-committed etcd Txn that needs nothing else on the stack) sent every 10 ms through a
    standby's REST API until one succeeds; the killed member is started again (it joins as a
    standby) before the next kill, so there are always three. Beside the lease (the floor: a dead
    leader's key outlives it by up to one lease) and a write through the same standby before the kill."""
    if EtcdCluster.unavailable():
        log(f"ha: skipped: {EtcdCluster.unavailable()}")
        return
    d = tempfile.mkdtemp(prefix="mooring-bench-ha-", dir="/tmp")
    etcd = new_etcd(d)
    # Always secure: the write is an ACL policy, which needs ACLs on.
    c = HaCluster(BIN, etcd.url("/bench"), lease=f"{HA_LEASE_S:g}s", name="mooring-bench-ha",
                  logs_dir=os.path.join(BIN, "bench-logs", "ha"), secure=True)
    open_clusters.append(c)
    try:
        etcd.start()
        c.start_all()
        failover, steady, firsts = [], [], []
        for k in range(HA_KILLS):
            lead = c.leader()
            if lead is None:
                raise RuntimeError(f"kill {k}: no leader")
            standby = next(i for i in range(len(c.members)) if i != lead)
            api = c.api_of(standby)
            api.timeout = 2
            body = {"Rules": {"Node": "read"}}
            t = time.perf_counter()
            api.json("PUT", f"/v1/acl/policy/bench-before-{k}", body)
            steady.append((time.perf_counter() - t) * 1000)
            c.kill_member(lead)
            t0 = time.perf_counter()
            answers = {}
            while True:
                try:
                    st, hdr, _ = api.request("PUT", f"/v1/acl/policy/bench-after-{k}", body)
                except (OSError, RuntimeError):
                    st, hdr = "error", {}
                if st == 200:
                    break
                answers[st] = answers.get(st, 0) + 1
                if time.perf_counter() - t0 > 60:
                    raise RuntimeError(f"kill {k}: no write served through member {standby} within 60 s ({answers})")
                time.sleep(0.01)
            failover.append((time.perf_counter() - t0) * 1000)
            firsts.append({"killed": lead, "through": standby, "answered_by": hdr.get("X-Mooring-Leader", ""),
                           "refused": answers, "ms": failover[-1]})
            log(f"ha: kill {k + 1}/{HA_KILLS}: member {lead} killed; first write through member {standby} "
                f"after {failover[-1]:.0f} ms ({answers})")
            c.start_member(lead)  # back as a standby: three members again
            if c.leader() is None:
                raise RuntimeError(f"kill {k}: no leader after the restart of member {lead}")
        lease_ms = HA_LEASE_S * 1000
        details["ha_failover"] = {"kills": HA_KILLS, "lease_ms": lease_ms, "failover_ms": failover,
                                  "steady_write_ms": steady, "each": firsts}
        note = f"max {max(failover):.0f} ms; a write through the standby before the kill: p50 {percentile(steady, 50):.1f} ms"
        row("ha", f"failover: leader kill -9 -> first write through a standby, p50 ({HA_KILLS} kills)",
            percentile(failover, 50), "ms", lease_ms, "the leader lease (--leader-lease)", ("ratio", "<=", 2), note)
        row("ha", f"failover: leader kill -9 -> first write through a standby, p99 ({HA_KILLS} kills)",
            percentile(failover, 99), "ms", lease_ms, "the leader lease (--leader-lease)", ("ratio", "<=", 2))
    finally:
        close_cluster(c)
        close_etcd(etcd)
        keep_logs(d, "ha-etcd")
        shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# snapshot: commit latency of the etcd backend while it writes a snapshot (issue 22, gap A)

def bench_snapshot():
    """mooring-bench-snapshot on a three-member etcd: a state of SNAPSHOT_ROWS volume-sized rows,
    then SNAPSHOT_COMMITS one-row commits back to back, in four passes (same run, same state): no
    snapshot (the reference), the snapshot written on the writer thread inside the commit that made
    it due every 1000 (the backend before gap A), background snapshots every 1000 whatever their
    size (before the size policy), and the backend's own policy (at least 1000 commits and a log of
    a quarter of the snapshot's bytes, or 20,000 commits)."""
    if EtcdCluster.unavailable():
        log(f"snapshot: skipped: {EtcdCluster.unavailable()}")
        return
    d = tempfile.mkdtemp(prefix="mooring-bench-snapshot-", dir="/tmp")
    etcd = new_etcd(d)
    try:
        etcd.start()
        res = run_json([os.path.join(BIN, "bench", "mooring-bench-snapshot"), "--etcd", etcd.url(""),
                        "--rows", str(SNAPSHOT_ROWS), "--commits", str(SNAPSHOT_COMMITS)],
                       os.path.join(d, "bench-snapshot.log"), timeout=1800)
    finally:
        close_etcd(etcd)
        keep_logs(d, "snapshot")
        shutil.rmtree(d, ignore_errors=True)
    details["snapshot"] = res
    ref, old, every, new = res["no_snapshot"], res["writer_snapshot"], res["every_s"], res["background"]
    what = f"the same commits with no snapshot due, same run ({SNAPSHOT_ROWS} rows)"
    # What must hold: no commit waits for a snapshot, only for the chunk put ahead of it in etcd.
    row("snapshot", f"commit latency max, the backend's snapshot policy ({SNAPSHOT_ROWS} rows)",
        new["max_ms"], "ms", ref["max_ms"], what, ("ratio", "<=", 10),
        f"p50 {new['p50_ms']:.1f} ms (reference {ref['p50_ms']:.1f}); snapshots: {new['snapshots']}; "
        f"commits over 100 ms: {new['over_100ms']}")
    row("snapshot", "commit latency p99, the backend's snapshot policy", new["p99_ms"], "ms", ref["p99_ms"], what)
    row("snapshot", "commit latency p99, background snapshots every 1000 whatever their size (before the policy)",
        every["p99_ms"], "ms", ref["p99_ms"], what,
        note=f"p50 {every['p50_ms']:.1f} ms, max {every['max_ms']:.0f} ms; snapshots: {every['snapshots']}")
    row("snapshot", "commit latency max, snapshot on the writer thread (before)", old["max_ms"], "ms", ref["max_ms"], what,
        note=f"p99 {old['p99_ms']:.0f} ms; commits over 100 ms: {old['over_100ms']}")
    # What a new leader loads after the policy's pass: the snapshot and the log it left; beside
    # the load of the same state with an empty log (the pass's own start).
    row("snapshot", f"load after the policy's pass (a new leader's), log of {new['log_entries_after']} entries",
        new["reload_ms"], "ms", new["load_ms"], "the same state with an empty log, same run")


# --------------------------------------------------------------------------------------------
# claims: a new-claim storm through the agent gRPC service, on SQLite and on etcd (issue 22)

def claims_on(c, label):
    """CLAIMS_N new claims from CLAIMS_NODES simulated nodes (mooring-bench-claims, each node its
    own mutual-TLS channel and certificate, or plaintext on the insecure stack) on a started
    control plane `c`: the nodes register and heartbeat, the volumes (node-only plugin "sim") and
    one allocation per volume go in through the REST API, then every claim at once."""
    nodes = [f"sim-{i}" for i in range(CLAIMS_NODES)]
    if c.secure:
        for nid in nodes:
            c.mooring("tls", "cert", "create", "-agent", "-node-id", nid, "-dir", c.tls_dir)
    alloc_file = os.path.join(c.dir, "claim-allocs.txt")
    args = [c.bin("mooring-bench-claims"), "--controlplane", f"127.0.0.1:{c.grpc_port}", "--alloc-file", alloc_file,
            "--nodes", str(CLAIMS_NODES), "--claims", str(CLAIMS_N), "--concurrency", "16"]
    if c.secure:
        args += ["--tls-dir", c.tls_dir]
    err = open(os.path.join(c.dir, f"bench-claims-{label}.log"), "ab")
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
    try:
        first = p.stdout.readline()
        if not first.strip():
            raise RuntimeError(f"mooring-bench-claims did not start; see {err.name}")

        def sim_healthy():
            st, _, body = c.api.request("GET", "/v1/plugin/csi/sim")
            return st == 200 and json.loads(body).get("NodesHealthy", 0) >= CLAIMS_NODES
        if not wait_until(sim_healthy, 60, 0.1):
            raise RuntimeError("the simulated nodes' plugin did not become healthy")
        t = time.perf_counter()
        for start in range(0, CLAIMS_N, 1000):
            vols = [{"ID": f"cv-{i:06d}", "Name": f"cv-{i:06d}", "PluginID": "sim", "ExternalID": f"ext-cv-{i:06d}",
                     "RequestedCapabilities": [{"AccessMode": "single-node-writer", "AttachmentMode": "file-system"}]}
                    for i in range(start, min(CLAIMS_N, start + 1000))]
            c.api.json("PUT", "/v1/volumes", {"Volumes": vols})

        def submit(i):
            a = {"Name": f"claim-{i}", "NodeID": nodes[i % CLAIMS_NODES],
                 "Volumes": {"data": {"Type": "csi", "Source": f"cv-{i:06d}", "AccessMode": "single-node-writer",
                                      "AttachmentMode": "file-system"}}}
            return c.api.json("POST", "/v1/allocations", {"Allocation": a})["ID"]
        ids = parallel(submit, range(CLAIMS_N), 8)
        setup_s = time.perf_counter() - t
        with open(alloc_file, "w") as f:
            f.write("\n".join(ids) + "\n")
        log(f"claims ({label}): {CLAIMS_N} volumes and allocations in {setup_s:.0f}s; the storm ...")
        cpu0 = cpu_ms(c.cp.pid)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        out, _ = p.communicate(timeout=900)
        cpu1 = cpu_ms(c.cp.pid)
        res = json.loads(out.decode().strip().splitlines()[-1])
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        err.close()
    res["setup_seconds"] = setup_s
    res["controlplane_cpu_ms"] = (cpu1 or 0) - (cpu0 or 0)
    res["controlplane_cpu_per_claim_us"] = res["controlplane_cpu_ms"] * 1000 / max(1, res["claims"])
    # The grants are in the state: a sample of the volumes, each with its one claim.
    sample = range(0, res["claims"], max(1, res["claims"] // 50))
    res["sampled_volumes_with_claim"] = sum(
        1 for i in sample if len(c.api.json("GET", f"/v1/volume/csi/cv-{i:06d}").get("Claims") or []) == 1)
    res["sampled_volumes"] = len(sample)
    if res["sampled_volumes_with_claim"] != res["sampled_volumes"] and not res["failed"]:
        raise RuntimeError(f"claims answered OK but only {res['sampled_volumes_with_claim']} of {len(sample)} sampled volumes hold one")
    return res


def bench_claims():
    c = new_cluster("claims")
    try:
        c.start_controlplane()
        sq = claims_on(c, "sqlite")
    finally:
        close_cluster(c)
    details["claims"] = sq
    row("claims", f"new-claim storm: {sq['claims']} claims granted, SQLite", sq["seconds"] * 1000, "ms", None, "",
        None, f"{sq['ok']} OK; p50 {sq['p50_ms']:.1f} ms, p99 {sq['p99_ms']:.1f} ms per claim; control plane CPU "
              f"{sq['controlplane_cpu_per_claim_us']:.0f} us per claim; {sq['nodes']} nodes, {sq['concurrency']} in flight, "
              f"{'mutual TLS' if sq['tls'] else 'plaintext'}" + (f"; refused {sq['codes']} {sq['errors'][:2]}" if sq["failed"] else ""))
    if EtcdCluster.unavailable():
        log(f"claims: etcd skipped: {EtcdCluster.unavailable()}")
        return
    d = tempfile.mkdtemp(prefix="mooring-bench-cle-", dir="/tmp")
    etcd = new_etcd(d)
    c = HaCluster(BIN, etcd.url("/claims"), members=1, name="mooring-bench-cle",
                  logs_dir=os.path.join(BIN, "bench-logs", "claims-etcd"), secure=not INSECURE)
    open_clusters.append(c)
    try:
        etcd.start()
        c.start_all()
        pids = etcd.pids()
        e0 = sum(cpu_ms(x) or 0 for x in pids)
        et = claims_on(c, "etcd")
        et["etcd_members_cpu_per_claim_us"] = (sum(cpu_ms(x) or 0 for x in pids) - e0) * 1000 / max(1, et["claims"])
    finally:
        close_cluster(c)
        close_etcd(etcd)
        keep_logs(d, "claims-etcd")
        shutil.rmtree(d, ignore_errors=True)
    details["claims_etcd"] = et
    row("claims", f"new-claim storm: {et['claims']} claims granted, etcd (3 members)", et["seconds"] * 1000, "ms",
        sq["seconds"] * 1000, "the same storm on SQLite, same run", ("ratio", "<=", 3),
        f"{et['ok']} OK; p50 {et['p50_ms']:.1f} ms, p99 {et['p99_ms']:.1f} ms per claim (SQLite {sq['p50_ms']:.1f}, "
        f"{sq['p99_ms']:.1f})" + (f"; refused {et['codes']} {et['errors'][:2]}" if et["failed"] else ""))
    row("claims", "new-claim storm: control plane CPU per claim, etcd", et["controlplane_cpu_per_claim_us"], "us",
        sq["controlplane_cpu_per_claim_us"], "the same on SQLite, same run", None,
        f"the etcd members' CPU (all three, during setup and storm): {et['etcd_members_cpu_per_claim_us']:.0f} us per claim")
    if sq["failed"] or et["failed"]:
        row("claims", "claims refused", sq["failed"] + et["failed"], "", None, "", ("value", "<=", 0))


# --------------------------------------------------------------------------------------------
# control plane footprint with many volumes

def du_mib(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total / 2**20


def footprint_on(c, data_mib, restart):
    """Registers FOOTPRINT_N volumes on a started control plane `c` (with its node n1) through the
    REST API's bulk PUT /v1/volumes (1000 a request), then restarts it (`restart()` returns the
    seconds from the start of the process to /v1/status/ready answering 200: the state loaded)."""
    pid = c.cp.pid
    time.sleep(0.5)
    empty_rss, _ = rss(pid)
    t0 = time.perf_counter()
    batch = 1000
    for start in range(0, FOOTPRINT_N, batch):
        vols = [{"ID": f"fv-{i:06d}", "Name": f"fv-{i:06d}", "PluginID": "hostpath", "ExternalID": f"ext-fv-{i:06d}",
                 "RequestedCapabilities": [{"AccessMode": "single-node-writer", "AttachmentMode": "file-system"}]}
                for i in range(start, min(FOOTPRINT_N, start + batch))]
        c.api.json("PUT", "/v1/volumes", {"Volumes": vols})
    reg_s = time.perf_counter() - t0
    time.sleep(0.5)
    live_rss, live_hwm = rss(pid)
    data = data_mib()
    load_s = restart()
    listed = c.api.json("GET", "/v1/volumes?per_page=1")
    time.sleep(0.5)
    load_rss, load_hwm = rss(c.cp.pid)
    return {"volumes": FOOTPRINT_N, "register_seconds": reg_s, "empty_rss_mib": empty_rss,
            "live_rss_mib": live_rss, "live_hwm_mib": live_hwm, "restart_rss_mib": load_rss,
            "restart_hwm_mib": load_hwm, "data_mib": data, "start_to_ready_s": load_s,
            "listed_after_restart": len(listed) if isinstance(listed, list) else None}


def wait_ready(api, timeout=300):
    def ready():
        try:
            return api.request("GET", "/v1/status/ready")[0] == 200
        except (OSError, RuntimeError):
            return False
    if not wait_until(ready, timeout, 0.01):
        raise RuntimeError("the control plane did not become ready after its restart")


def bench_footprint():
    c = new_cluster("footprint")
    try:
        c.start_controlplane()
        # The plugin the volumes name must be registered; node-only, so registration asks no
        # controller (a monolith would look each external id up, and these exist nowhere).
        c.start_node("n1", plugin_mode="node")
        cp_dir = os.path.join(c.dir, "cp")

        def restart():  # after a restart: everything loaded from SQLite
            c.cp.stop(30)
            t = time.perf_counter()
            c.start_controlplane()
            wait_ready(c.api)
            return time.perf_counter() - t

        sq = footprint_on(c, lambda: sum(os.path.getsize(os.path.join(cp_dir, f)) for f in os.listdir(cp_dir)
                                         if f.startswith("state.db")) / 2**20, restart)
    finally:
        close_cluster(c)
    details["footprint"] = sq
    row("footprint", f"control plane RSS, {FOOTPRINT_N} volumes registered", sq["live_rss_mib"], "MiB", sq["data_mib"],
        "state.db size (the data)", ("value", "<=", 300),
        f"HWM {sq['live_hwm_mib']:.0f} MiB; empty {sq['empty_rss_mib']:.0f} MiB; registered in {sq['register_seconds']:.0f} s")
    row("footprint", f"control plane RSS after restart ({FOOTPRINT_N} loaded)", sq["restart_rss_mib"], "MiB",
        sq["data_mib"], "state.db size (the data)", ("value", "<=", 300), f"HWM {sq['restart_hwm_mib']:.0f} MiB")
    if EtcdCluster.unavailable():
        log(f"footprint: etcd skipped: {EtcdCluster.unavailable()}")
        return
    footprint_etcd(sq)


def footprint_etcd(sq):
    """The same on the etcd backend (issue 22): one control plane (it leads) on a three-member etcd,
    the same volumes through the same API; its restart is a standby elected at once (a leader
    stopped with SIGTERM revokes its lease) that loads the state from etcd."""
    d = tempfile.mkdtemp(prefix="mooring-bench-fpe-", dir="/tmp")
    etcd = new_etcd(d)
    c = HaCluster(BIN, etcd.url("/footprint"), members=1, name="mooring-bench-fpe",
                  logs_dir=os.path.join(BIN, "bench-logs", "footprint-etcd"), secure=not INSECURE)
    open_clusters.append(c)
    try:
        etcd.start()
        c.start_all()
        c.start_node("n1", plugin_mode="node")

        def restart():
            c.members[0]["proc"].stop(30)
            t = time.perf_counter()
            c.start_member(0, wait=False)
            c.cp = c.members[0]["proc"]
            wait_ready(c.api)
            return time.perf_counter() - t

        et = footprint_on(c, lambda: du_mib(os.path.join(d, "etcd0.data")), restart)
        et["etcd_member_rss_mib"] = [rss(p)[0] for p in etcd.pids()]
    finally:
        close_cluster(c)
        close_etcd(etcd)
        keep_logs(d, "footprint-etcd")
        shutil.rmtree(d, ignore_errors=True)
    details["footprint_etcd"] = et
    row("footprint", f"control plane RSS, {FOOTPRINT_N} volumes registered, etcd", et["live_rss_mib"], "MiB",
        sq["live_rss_mib"], "the same on SQLite, same run", ("value", "<=", 300),
        f"HWM {et['live_hwm_mib']:.0f} MiB; empty {et['empty_rss_mib']:.0f} MiB; registered in "
        f"{et['register_seconds']:.0f} s (SQLite {sq['register_seconds']:.0f} s); one etcd member's data dir "
        f"{et['data_mib']:.0f} MiB; etcd members' RSS {', '.join(f'{x:.0f}' for x in et['etcd_member_rss_mib'])} MiB")
    row("footprint", f"control plane RSS after restart ({FOOTPRINT_N} loaded from etcd)", et["restart_rss_mib"], "MiB",
        sq["restart_rss_mib"], "the same on SQLite, same run", ("value", "<=", 300), f"HWM {et['restart_hwm_mib']:.0f} MiB")
    row("footprint", f"start -> ready with {FOOTPRINT_N} volumes (state load), etcd", et["start_to_ready_s"] * 1000, "ms",
        sq["start_to_ready_s"] * 1000, "the same on SQLite, same run")


# --------------------------------------------------------------------------------------------
# GC storm (in process, mooring-bench-gc)

def run_gc_storm(d, etcd_url=None):
    """mooring-bench-gc at GC_SIZES, on SQLite or (etcd_url) on the etcd backend."""
    args = [os.path.join(BIN, "bench", "mooring-bench-gc"), "--dir", os.path.join(d, "data")]
    for s in GC_SIZES:
        args += ["--volumes", str(s)]
    if etcd_url:
        args += ["--etcd", etcd_url]
    return run_json(args, os.path.join(d, "gc-etcd.log" if etcd_url else "gc.log"), timeout=900)["runs"]


def bench_gc():
    d = tempfile.mkdtemp(prefix="mooring-bench-gc-", dir="/tmp")
    etcd_runs, etcd_cpu_ms = [], 0.0
    try:
        runs = run_gc_storm(d)
        # The same storm on the etcd backend, on a three-member etcd started for it (issue 22).
        if EtcdCluster.unavailable():
            log(f"gc: etcd storm skipped: {EtcdCluster.unavailable()}")
        else:
            etcd = new_etcd(d)
            try:
                etcd.start()
                pids = etcd.pids()
                cpu0 = sum(cpu_ms(p) or 0 for p in pids)
                etcd_runs = run_gc_storm(d, etcd.url(""))
                etcd_cpu_ms = sum(cpu_ms(p) or 0 for p in pids) - cpu0
            finally:
                close_etcd(etcd)
    finally:
        keep_logs(d, "gc")
        shutil.rmtree(d, ignore_errors=True)
    details["gc"] = runs
    details["gc_etcd"] = {"runs": etcd_runs, "etcd_members_cpu_ms_all_sizes": etcd_cpu_ms}
    for r in runs:
        n = r["volumes"]
        note = (f"{r['transactions']} commits in {r['flushes']} SQLite transactions, "
                f"{r['examined_per_volume']:.1f} volumes examined per volume")
        if r["left_claimed"]:
            note += f"; {r['left_claimed']} NOT freed"
        row("gc", f"storm: {n} volumes freed", r["seconds"] * 1000, "ms", r["commit_ms"],
            "time inside SQLite commits", ("value", "<=", 5000) if n >= 10000 else None, note)
    if len(runs) >= 2:
        small, big = runs[0], runs[-1]
        row("gc", f"per-volume time {big['volumes']} vs {small['volumes']}", big["per_volume_us"], "us",
            small["per_volume_us"], f"per-volume time at {small['volumes']}", ("ratio", "<=", 1.5),
            "work per change must not grow with volume count")
        row("gc", f"single release p50 among {big['volumes']} volumes", big["single_release"]["p50_ms"], "ms",
            small["single_release"]["p50_ms"], f"among {small['volumes']}", ("ratio", "<=", 1.5),
            f"examined per release {big['single_release']['examined_per_release']:.1f} vs "
            f"{small['single_release']['examined_per_release']:.1f}")
    sqlite_by_n = {r["volumes"]: r for r in runs}
    for r in etcd_runs:
        n, ref = r["volumes"], sqlite_by_n.get(r["volumes"])
        note = (f"{r['transactions']} commits in {r['flushes']} etcd group commits, {r['commit_ms']:.0f} ms inside them; "
                f"{r['examined_per_volume']:.1f} volumes examined per volume")
        if r["left_claimed"]:
            note += f"; {r['left_claimed']} NOT freed"
        row("gc", f"storm: {n} volumes freed, etcd (3 members)", r["seconds"] * 1000, "ms",
            ref["seconds"] * 1000 if ref else None, "the same storm on SQLite, same run",
            ("ratio", "<=", 3) if n >= 10000 else None, note)
        if n >= 10000:
            row("gc", f"storm: {n} volumes freed, etcd: time", r["seconds"] * 1000, "ms", r["commit_ms"],
                "time inside etcd commits", ("value", "<=", 10000))
            row("gc", f"storm per volume, etcd ({n})", r["per_volume_us"], "us",
                ref["per_volume_us"] if ref else None, "per volume on SQLite, same run", None,
                f"CPU per volume (bench process) {r['cpu_per_volume_us']:.0f} us vs "
                f"{ref['cpu_per_volume_us'] if ref else 0:.0f} us on SQLite, plus the etcd members' "
                f"{etcd_cpu_ms * 1000 / max(1, sum(x['volumes'] for x in etcd_runs)):.0f} us (over all sizes); "
                f"commit time per volume {r['commit_ms'] * 1000 / n:.0f} us vs "
                f"{(ref['commit_ms'] * 1000 / n) if ref else 0:.0f} us on SQLite")
            row("gc", f"single release p50 among {n} volumes, etcd", r["single_release"]["p50_ms"], "ms",
                ref["single_release"]["p50_ms"] if ref else None, "the same on SQLite, same run")


# --------------------------------------------------------------------------------------------
# the cost of security: lifecycle and api again on the plaintext stack, in the same run

def plaintext_pass():
    global PASS
    c = new_cluster("cluster-plaintext", secure=False)
    PASS = "plaintext"
    try:
        c.start_controlplane()
        c.start_node("n1")
        time.sleep(2.0)
        if wanted("lifecycle"):
            bench_lifecycle(c, "n1", COMPARE_N)
        if wanted("api"):
            bench_api(c, "lv-00000" if wanted("lifecycle") else "av-00000")
    finally:
        PASS = ""
        close_cluster(c)
    security_cost_rows()


def security_cost_rows():
    """The secure stack's figures over the plaintext stack's, measured in this run."""
    sec, pt = details.get("lifecycle"), details.get("lifecycle_plaintext")
    if sec and pt:
        for label, key, pct in (("claim-to-mounted p50", "claim_to_mounted_ms", "p50"),
                                ("stop-to-freed p50", "stop_to_freed_ms", "p50"),
                                ("stop-to-freed p99", "stop_to_freed_ms", "p99")):
            row("security", f"{label}, secure", sec[key][pct], "ms", pt[key][pct], "plaintext stack, same run")
        row("security", "lifecycles/s, secure", sec["lifecycles_per_second"], "/s", pt["lifecycles_per_second"],
            "plaintext stack, same run")
        cs, cp = sec.get("cpu_ms_per_lifecycle", {}), pt.get("cpu_ms_per_lifecycle", {})
        if all(k in d for d in (cs, cp) for k in ("controlplane", "agent")):
            row("security", "CPU per lifecycle (control plane + agent), secure", cs["controlplane"] + cs["agent"], "ms",
                cp["controlplane"] + cp["agent"], "plaintext stack, same run",
                note=f"control plane {cs['controlplane']:.2f} vs {cp['controlplane']:.2f} ms, "
                     f"agent {cs['agent']:.2f} vs {cp['agent']:.2f} ms")
    sec, pt = details.get("api"), details.get("api_plaintext")
    if sec and pt:
        for key, label in (("list", "GET /v1/volumes"), ("one", "GET /v1/volume/csi/:id")):
            row("security", f"{label} req/s, HTTPS + token", sec[key]["mooring"]["rps"], "/s",
                pt[key]["mooring"]["rps"], "plain HTTP, no ACL, same run",
                note=f"nginx: HTTPS {sec[key]['nginx']['rps']:.0f}/s, plain {pt[key]['nginx']['rps']:.0f}/s")


# --------------------------------------------------------------------------------------------
# metrics: the lifecycle with Prometheus metrics on beside the same stack with --metrics=off

def bench_metrics():
    """Rounds of two fresh stacks, one with --metrics=off on both services and one with metrics on,
    each running METRICS_N lifecycles at concurrency C, in the order off-on, on-off, off-on, ...
    (ABBA), so a machine whose load drifts during the run favours neither; lifecycles/s is the mean
    over the rounds, p50/p99 over all of a mode's lifecycles."""
    got = {"off": {"lps": [], "freed": [], "mounted": [], "failed": 0, "cpu": []},
           "on": {"lps": [], "freed": [], "mounted": [], "failed": 0, "cpu": []}}
    scrape = {}
    for rnd in range(METRICS_ROUNDS):
        for mode in (("off", "on") if rnd % 2 == 0 else ("on", "off")):
            c = new_cluster(f"metrics-{mode}-{rnd}", metrics=(mode == "on"))
            try:
                c.start_controlplane()
                c.start_node("n1")
                time.sleep(1.0)
                vids = [f"mv-{i:05d}" for i in range(METRICS_N)]
                parallel(c.create_volume, vids, 4)
                pids = [c.cp.pid, c.nodes["n1"].pid]
                cpu0 = [cpu_ms(p) for p in pids]
                to_mounted, to_freed, failures, _, wall = run_lifecycles(c, "n1", vids, C, f"m{mode}{rnd}")
                cpu1 = [cpu_ms(p) for p in pids]
                g = got[mode]
                g["lps"].append(len(to_freed) / wall)
                g["freed"] += to_freed
                g["mounted"] += to_mounted
                g["failed"] += len(failures)
                if None not in cpu0 and None not in cpu1:
                    g["cpu"].append(sum(b - a for a, b in zip(cpu0, cpu1)) / max(1, len(to_freed)))
                log(f"metrics {mode} round {rnd + 1}: {len(to_freed)}/{METRICS_N} lifecycles at "
                    f"{g['lps'][-1]:.1f}/s, stop-to-freed p99 {percentile(to_freed, 99):.1f} ms")
                if mode == "on" and not scrape:
                    # What one scrape costs the control plane, after all those lifecycles.
                    times = []
                    size = 0
                    for _ in range(20):
                        t = time.perf_counter()
                        st, _, body = c.api.request("GET", "/v1/metrics")
                        times.append((time.perf_counter() - t) * 1000)
                        size = len(body) if st == 200 else 0
                    scrape = {"p50_ms": percentile(times, 50), "bytes": size}
            finally:
                close_cluster(c)
    mean = lambda xs: sum(xs) / len(xs) if xs else 0  # noqa: E731
    on, off = got["on"], got["off"]
    details["metrics"] = {
        "n_per_round": METRICS_N, "rounds": METRICS_ROUNDS, "concurrency": C,
        **{mode: {"lifecycles_per_second": got[mode]["lps"],
                  "stop_to_freed_ms": {"p50": percentile(got[mode]["freed"], 50), "p99": percentile(got[mode]["freed"], 99)},
                  "claim_to_mounted_ms": {"p50": percentile(got[mode]["mounted"], 50),
                                          "p99": percentile(got[mode]["mounted"], 99)},
                  "cpu_ms_per_lifecycle": mean(got[mode]["cpu"]), "failed": got[mode]["failed"]} for mode in got},
        "scrape": scrape,
    }
    row("metrics", f"lifecycles/s, metrics on ({METRICS_ROUNDS}x{METRICS_N}, c={C})", mean(on["lps"]), "/s",
        mean(off["lps"]), "--metrics=off, same run, stacks in the order off-on, on-off, ...", ("ratio", ">=", 0.95))
    row("metrics", "stop-to-freed p99, metrics on", percentile(on["freed"], 99), "ms", percentile(off["freed"], 99),
        "--metrics=off, same run", ("ratio", "<=", 1.05))
    row("metrics", "stop-to-freed p50, metrics on", percentile(on["freed"], 50), "ms", percentile(off["freed"], 50),
        "--metrics=off, same run")
    if on["cpu"] and off["cpu"]:
        row("metrics", "CPU per lifecycle (control plane + agent), metrics on", mean(on["cpu"]), "ms", mean(off["cpu"]),
            "--metrics=off, same run")
    # One observation in process, beside the clock read each timed call site pays anyway.
    obs_bin = os.path.join(BIN, "bench", "mooring-bench-metrics")
    if os.path.exists(obs_bin):
        obs = run_json([obs_bin], os.path.join(tempfile.gettempdir(), "mooring-bench-metrics.log"))
        details["metrics"]["observe"] = obs
        row("metrics", "one CSI call's observation (series lookup + histogram)", obs["csi_observe_ns"], "ns",
            obs["clock_read_ns"], "one steady_clock read")
    if scrape:
        row("metrics", "GET /v1/metrics after the lifecycles, p50", scrape["p50_ms"], "ms", None, "",
            note=f"{scrape['bytes']} bytes of exposition")
    if on["failed"] or off["failed"]:
        row("metrics", "failed lifecycles", on["failed"] + off["failed"], "", None, "", ("value", "<=", 0))


# --------------------------------------------------------------------------------------------
# plugins: a CSI plugin that runs as an allocation (issue 27)

PLUGIN_ROUNDS = int(os.environ.get("MOORING_BENCH_PLUGIN_ROUNDS", "10"))


def bench_plugins():
    """Submit of a plugin allocation -> its instance healthy and registered with its AllocID, as the
    control plane lists it; beside the same plugin process alone, from spawn to its socket."""
    c = new_cluster("plugins")
    try:
        c.start_controlplane()
        c.start_node("p1", config_plugin=False)
        task = {"Command": c.bin("mooring-hostpath"), "Args": c.plugin_args("p1"),
                "CSIPlugin": {"ID": "hostpath", "Type": "monolith", "HealthTimeout": "30s"}}

        def served_by():
            st, _, body = c.api.request("GET", "/v1/plugin/csi/hostpath")
            if st != 200:
                return ""
            n = (json.loads(body).get("Nodes") or {}).get("p1") or {}
            return n.get("AllocID", "") if n.get("Healthy") else ""

        def status(aid):
            return c.api.json("GET", f"/v1/allocation/{aid}").get("ClientStatus")

        started = []
        for i in range(PLUGIN_ROUNDS):
            t0 = time.perf_counter()
            aid = c.api.json("POST", "/v1/allocations",
                             {"Allocation": {"Name": f"hostpath-{i}", "NodeID": "p1", "Task": task}})["ID"]
            if not wait_until(lambda: served_by() == aid, 60, 0.005):
                raise RuntimeError(f"plugin allocation {aid} did not become healthy:\n" + c.nodes["p1"].output()[-2000:])
            started.append((time.perf_counter() - t0) * 1000)
            c.api.json("POST", f"/v1/allocation/{aid}/stop")
            # One hostpath per node at a time (its node lock): the next waits for this one's exit.
            if not wait_until(lambda: status(aid) in ("complete", "failed"), 60, 0.02):
                raise RuntimeError(f"plugin allocation {aid} did not stop")
            # The stop's own report went out just now; the agent spaces its reports by at least
            # 200 ms (min_heartbeat_gap), which a plugin started right after would wait out.
            time.sleep(0.3)
        alone = []
        for i in range(PLUGIN_ROUNDS):
            sock_dir = tempfile.mkdtemp(prefix="hp-", dir=c.dir)
            sock = os.path.join(sock_dir, "csi.sock")
            args = [c.bin("mooring-hostpath"), "--data-dir", os.path.join(c.dir, "hostpath-alone"),
                    "--node-id", f"alone-{i}"]
            t0 = time.perf_counter()
            p = subprocess.Popen(args, env={"CSI_ENDPOINT": "unix://" + sock, "PATH": os.environ.get("PATH", "")},
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                if not wait_until(lambda: os.path.exists(sock), 30, 0.002):
                    raise RuntimeError("mooring-hostpath alone did not create its socket")
                alone.append((time.perf_counter() - t0) * 1000)
            finally:
                p.terminate()
                p.wait(10)
        p50, p99 = percentile(started, 50), percentile(started, 99)
        a50 = percentile(alone, 50)
        row("plugins", f"plugin allocation: submit -> healthy and registered, p50 ({PLUGIN_ROUNDS})", p50, "ms", a50,
            "the plugin process alone: spawn -> its socket", None, f"max {max(started):.0f} ms")
        row("plugins", "plugin allocation: submit -> healthy and registered, p99", p99, "ms", percentile(alone, 99),
            "the plugin process alone, p99")
        upgrade = plugin_upgrade(c, task)
        details["plugins"] = {"start_to_registered_ms": started, "plugin_alone_ms": alone, "upgrade": upgrade}
    finally:
        close_cluster(c)


def plugin_upgrade(c, task):
    """The time a node's plugin is unavailable during an upgrade (issue 27, target 0): a stream of
    node calls (NodeGetVolumeStats on a mounted volume, one at a time, each to the instance the
    agent's registry names then) through PUT /v1/allocation/:id with a new vendor version; the
    calls refused and the longest stall, beside the same stream with no upgrade, in this run."""
    def versioned(v):
        return dict(task, Args=task["Args"] + ["--vendor-version", v], KillTimeout="5s")

    def served_by():
        st, _, body = c.api.request("GET", "/v1/plugin/csi/hostpath")
        n = (json.loads(body).get("Nodes") or {}).get("p1") or {} if st == 200 else {}
        return n.get("AllocID", "") if n.get("Healthy") else ""

    old = c.api.json("POST", "/v1/allocations",
                     {"Allocation": {"Name": "hostpath-v1", "NodeID": "p1", "Task": versioned("1")}})["ID"]
    if not wait_until(lambda: served_by() == old, 60, 0.01):
        raise RuntimeError("plugin allocation v1 did not become healthy")
    c.create_volume("upgrade-vol")
    user = c.run_alloc("upgrade-user", "upgrade-vol", "p1", TASK)
    c.wait_alloc_status(user)
    with open(c.call_log("p1")) as f:
        pub = [json.loads(line) for line in f if '"NodePublishVolume"' in line][-1]
    registry = os.path.join(c.node_dir("p1"), "agent", "plugins.json")

    def stream(during):
        stop = os.path.join(c.dir, f"stream-stop-{time.monotonic_ns()}")
        p = subprocess.Popen([c.bin("mooring-bench-stream"), "--registry", registry, "--plugin", "hostpath",
                              "--volume-id", pub["volume_id"], "--volume-path", pub["path"], "--stop-file", stop],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            during()
            time.sleep(0.5)
        finally:
            open(stop, "w").close()
            out, _ = p.communicate(timeout=60)
        return json.loads(out.decode().strip().splitlines()[-1])

    ref = stream(lambda: time.sleep(3))
    timing = {}

    def upgrade():
        t0 = time.perf_counter()
        new = c.api.json("PUT", f"/v1/allocation/{old}", {"Task": versioned("2")}).get("NewID", "")
        done = lambda: (c.api.json("GET", f"/v1/allocation/{old}").get("Rollout") or {}).get("Status") != "running"
        if not new or not wait_until(done, 120, 0.05):
            raise RuntimeError(f"the upgrade of {old} did not finish")
        rollout = c.api.json("GET", f"/v1/allocation/{old}").get("Rollout") or {}
        if rollout.get("Status") != "done" or served_by() != new:
            raise RuntimeError(f"the upgrade of {old} did not succeed: {json.dumps(rollout)[:1500]}")
        timing["rollout_ms"] = (time.perf_counter() - t0) * 1000
        timing["new"] = new

    up = stream(upgrade)
    c.stop_alloc(user)
    c.wait_volume_free("upgrade-vol")
    c.api.json("POST", f"/v1/allocation/{timing['new']}/stop")
    row("plugins", "upgrade: node calls refused while the plugin is replaced", up["refused"], "calls",
        ref["refused"], "the same stream, no upgrade", ("value", "<=", 0),
        f"{up['calls']} calls over {up['seconds']:.1f} s, {up['switches']} registry switch(es); "
        f"rollout {timing['rollout_ms']:.0f} ms" + (f"; {up['errors'][:2]}" if up["errors"] else ""))
    row("plugins", "upgrade: longest stall of a node call (held until the new copy takes over)", up["max_ms"], "ms",
        ref["max_ms"], "the slowest call of the same stream, no upgrade", None,
        f"p99 {up['p99_ms']:.1f} ms beside {ref['p99_ms']:.1f} ms; p50 {up['p50_ms']:.2f} ms beside {ref['p50_ms']:.2f} ms")
    return {"stream": up, "reference": ref, **timing}


def fmt(v, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        s = f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    else:
        s = str(v)
    return f"{s} {unit}".strip()


def fmt_ratio(x):
    if x is None:
        return "-"
    return f"{x:.2f}" if x >= 0.1 else f"{x:.4f}"


def print_table():
    head = ("bench", "metric", "measured", "reference", "ratio", "target", "status")
    lines = []
    for r in rows:
        ref = fmt(r["reference"], r["unit"]) if r["reference"] is not None else "-"
        lines.append((r["bench"], r["metric"], fmt(r["value"], r["unit"]), ref,
                      fmt_ratio(r["ratio"]), r["target"] or "-", r["status"]))
    widths = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(head)]
    sep = "  "
    print()
    print(sep.join(h.ljust(w) for h, w in zip(head, widths)))
    print(sep.join("-" * w for w in widths))
    for x in lines:
        print(sep.join(v.ljust(w) for v, w in zip(x, widths)))
    print()
    print("reference for each row:")
    for r in rows:
        if r["reference_what"] or r["note"]:
            print(f"  {r['metric']}: {r['reference_what']}{'; ' if r['reference_what'] and r['note'] else ''}{r['note']}")


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "kernel": platform.release(),
            "os": platform.freedesktop_os_release().get("PRETTY_NAME", "") if hasattr(platform, "freedesktop_os_release") else "",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def main():
    needed = ("bench", "mooring-bench-task") if ONLY == {"walls"} else ("services", "controlplane", "mooring-controlplane")
    if not BIN or not os.path.exists(os.path.join(BIN, *needed)):
        print("run_bench: set MOORING_BIN to the Release build dir", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("run_bench: must run as root (the hostpath plugin bind-mounts)", file=sys.stderr)
        return 2

    def on_signal(signo, _frame):
        raise KeyboardInterrupt(f"signal {signo}")

    signal.signal(signal.SIGTERM, on_signal)
    started = time.perf_counter()
    failed = []

    def run_one(name, fn):
        """Runs one bench if asked for; a failed bench is a row and a note, and never hides the others.
        The plaintext pass is asked for through lifecycle and api."""
        if not wanted(name) and name != "plaintext":
            return
        log(f"{name} ...")
        t = time.perf_counter()
        try:
            fn()
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            failed.append(f"{name}: {e}")
            row(name, "bench failed", None, "", None, "", ("value", "<=", 0), str(e)[:200])
        log(f"{name} done in {time.perf_counter() - t:.0f}s")
    log(f"N={N} concurrency={C} gc={GC_SIZES} footprint={FOOTPRINT_N} wrk={WRK_SECONDS}s on {os.cpu_count()} cores; "
        f"stack {'plaintext (MOORING_BENCH_INSECURE=1)' if INSECURE else 'secure (mutual TLS, HTTPS, ACL token)'}")
    try:
        if wanted("lifecycle") or wanted("api") or wanted("agent"):
            c = new_cluster("cluster")
            try:
                c.start_controlplane()
                c.start_node("n1")
                time.sleep(2.0)
                a_rss, a_hwm = rss(c.nodes["n1"].pid)
                p_rss, _ = rss(c.plugin_pid("n1"))
                a_maps = smaps_rollup(c.nodes["n1"].pid) or {}
                p_maps = smaps_rollup(c.plugin_pid("n1")) or {}
                agent_idle = {"agent_rss_mib": a_rss, "agent_hwm_mib": a_hwm, "plugin_rss_mib": p_rss, **a_maps,
                              "plugin": p_maps}
                if wanted("agent"):
                    row("agent", "node agent RSS, idle, one plugin", a_rss, "MiB", p_rss,
                        "the hostpath plugin's RSS (a plain gRPC server)", ("value", "<=", 15),
                        (f"PSS {a_maps['pss_mib']:.1f}, anonymous {a_maps['anon_mib']:.1f} MiB (file-backed "
                         f"{a_rss - a_maps['anon_mib']:.1f}, of which {a_maps['shared_mib']:.1f} shared); the plugin's "
                         f"PSS {p_maps.get('pss_mib', 0):.1f}, anonymous {p_maps.get('anon_mib', 0):.1f}")
                        if a_maps and a_rss is not None else "")
                    if a_maps:
                        row("agent", "node agent PSS, idle, one plugin", a_maps["pss_mib"], "MiB", a_rss,
                            "its RSS", note=f"private (USS) {a_maps['private_mib']:.1f} MiB")
                        row("agent", "node agent anonymous memory, idle, one plugin", a_maps["anon_mib"], "MiB",
                            p_maps.get("anon_mib"), "the plugin's anonymous memory")
                one = "lv-00000"
                for name, fn in (("lifecycle", lambda: bench_lifecycle(c, "n1")),
                                 ("api", lambda: bench_api(c, one if wanted("lifecycle") else "av-00000")),
                                 ("agent", lambda: bench_agent(c, "n1", agent_idle))):
                    run_one(name, fn)
            finally:
                close_cluster(c)
        if not INSECURE and (wanted("lifecycle") or wanted("api")):
            run_one("plaintext", plaintext_pass)
        for name, fn in (("plugins", bench_plugins), ("footprint", bench_footprint), ("gc", bench_gc),
                         ("metrics", bench_metrics), ("claims", bench_claims),
                         ("nodes", lambda: node_fleet.bench_nodes(sys.modules[__name__])),
                         ("drain", lambda: drain_handoff.bench_drain(sys.modules[__name__])), ("ha", bench_ha_failover),
                         ("snapshot", bench_snapshot), ("walls", bench_walls)):
            run_one(name, fn)
    finally:
        for c in list(open_clusters):
            close_cluster(c)
        for e in list(open_etcds):
            close_etcd(e)

    print_table()
    drift = details.get("lifecycle", {}).get("drift_p50_ms")
    if drift:
        f, l = drift["first_100"], drift["last_100"]
        print(f"lifecycle drift (p50, ms): claim-to-mounted first 100 {f['claim_to_mounted']:.0f} -> last 100 "
              f"{l['claim_to_mounted']:.0f}; stop-to-freed {f['stop_to_freed']:.0f} -> {l['stop_to_freed']:.0f}")
    lc = details.get("lifecycle", {})
    if lc.get("breakdown_p50_ms"):
        print("lifecycle breakdown (ms; event times have ms resolution):")
        print(f"  {'step':<62} {'last 50':>8} {'slowest':>8} {'slowest':>8}")
        print(f"  {'':<62} {'p50':>8} {'claims':>8} {'stops':>8}")
        tc, ts = lc.get("breakdown_slowest_claims_ms", {}), lc.get("breakdown_slowest_stops_ms", {})
        for k, v in lc["breakdown_p50_ms"].items():
            print(f"  {k:<62} {v:8.1f} {tc.get(k, float('nan')):8.1f} {ts.get(k, float('nan')):8.1f}")
    result = {"machine": machine(), "settings": {"n": N, "concurrency": C, "gc_sizes": GC_SIZES,
                                                 "stack": "plaintext" if INSECURE else "secure",
                                                 "compare_n": None if INSECURE else COMPARE_N,
                                                 "footprint_volumes": FOOTPRINT_N, "wrk_seconds": WRK_SECONDS},
              "rows": rows, "details": details, "failed": failed,
              "seconds": time.perf_counter() - started}
    out = os.environ.get("MOORING_BENCH_OUT") or os.path.join(BIN, "bench-results.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    # latest.json is the record of a whole run; a run of some parts (MOORING_BENCH_ONLY) is kept
    # beside it under their names, so it never replaces the whole run's record.
    name = "latest.json" if not ONLY else "only-" + "-".join(sorted(ONLY)) + ".json"
    latest = os.path.join(HERE, "results", name)
    if ONLY == {"walls"}:
        latest = out  # a quick check of the walls: the full run's record stays
    else:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        shutil.copyfile(out, latest)
    missed = [r["metric"] for r in rows if r["status"] == "MISSED"]
    log(f"wrote {out}{'' if latest == out else ' and ' + latest}; {len(missed)} target(s) missed; {time.perf_counter() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
