"""The `nodes` part of `make bench` (issue 46): thousands of simulated node agents on one control
plane (mooring-bench-nodes, bench/node_fleet.cpp), Release and secure as `make run` starts it, on
SQLite. For each size in MOORING_BENCH_NODES (default 1000): the control plane's CPU (cores, from
/proc/PID/stat over a steady window), RSS and open descriptors; heartbeat round trips; the time
for 1000 nodes to register at once among the others; node-down detection for 100 nodes that go
silent (from each one's last answered heartbeat to its NodeDown event on /v1/event/stream, against
the TTL); and `GET /v1/volume/csi/:id` latency with the fleet connected. Each figure sits beside
the same figure of the same control plane before the fleet came (one simulated node).
Driven by run_bench.py, which passes itself as `rb` (row, log, clusters, cpu_ms, details).
"""

import json
import os
import subprocess
import threading
import time

from harness import percentile, read_status, wait_until

SIZES = [int(x) for x in os.environ.get("MOORING_BENCH_NODES", "1000").split(",") if x]
WINDOW_S = float(os.environ.get("MOORING_BENCH_NODES_WINDOW", "30"))  # the steady window
BURST = 1000  # nodes registering at once
SILENT = 100  # nodes that go silent
GETS = 1000  # GET /v1/volume/csi/:id per probe, one at a time, every 10 ms
TTL_S = 10.0  # the control plane's default --heartbeat-ttl
HEARTBEAT_MS = 5000  # the agent's default --heartbeat-interval; it heartbeats at a third of the TTL when shorter


def open_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def rss_mib(pid):
    return (read_status(pid) or {}).get("VmRSS")


class Fleet:
    """mooring-bench-nodes as a child: JSON lines out, commands in."""

    def __init__(self, rb, c, nodes, burst, prefix, heartbeat_ms=HEARTBEAT_MS):
        args = [c.bin("mooring-bench-nodes"), "--controlplane", f"127.0.0.1:{c.grpc_port}", "--nodes", str(nodes),
                "--burst", str(burst), "--prefix", prefix, "--heartbeat-ms", str(heartbeat_ms)]
        if c.secure:
            args += ["--tls-dir", c.tls_dir]
        self.err = open(os.path.join(c.dir, f"bench-nodes-{prefix}.log"), "ab")
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                  start_new_session=True)
        self.ready = self.read()
        if not self.ready.get("ready"):
            raise RuntimeError(f"mooring-bench-nodes did not start; see {self.err.name}")

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"mooring-bench-nodes exited; see {self.err.name}")
        return json.loads(line)

    def ask(self, command):
        self.p.stdin.write((command + "\n").encode())
        self.p.stdin.flush()
        return self.read()

    def close(self):
        if self.p.poll() is None:
            try:
                self.ask("quit")
                self.p.wait(30)
            except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired):
                pass
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.err.close()


class NodeDownWatch:
    """Follows /v1/event/stream?topic=Node and notes when each NodeDown arrives (CLOCK_MONOTONIC)."""

    def __init__(self, c):
        self.down = {}
        self.conn = None
        self.stop = False
        self.error = None
        self.thread = threading.Thread(target=self.run, args=(c,), daemon=True)
        self.thread.start()

    def run(self, c):
        import http.client
        from harness import tls_client_context
        try:
            if c.secure:
                self.conn = http.client.HTTPSConnection("127.0.0.1", c.http_port, context=tls_client_context(c.ca_file))
            else:
                self.conn = http.client.HTTPConnection("127.0.0.1", c.http_port)
            self.conn.request("GET", "/v1/event/stream?topic=Node", headers=c.api.headers())
            r = self.conn.getresponse()
            while not self.stop:
                line = r.readline()
                if not line:
                    return
                now = time.monotonic()
                for e in (json.loads(line).get("Events") or []) if line.strip() else []:
                    if e.get("Type") == "NodeDown":
                        self.down.setdefault(e.get("Key"), now)
        except Exception as e:  # noqa: BLE001
            if not self.stop:
                self.error = str(e)

    def close(self):
        self.stop = True
        if self.conn:
            try:
                self.conn.sock.shutdown(2)
            except (OSError, AttributeError):
                pass
        self.thread.join(5)


def probe_gets(c, vid, n=GETS):
    """GET /v1/volume/csi/:id one at a time, every 10 ms (a dashboard's pace, not a load test)."""
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        st, _, _ = c.api.request("GET", f"/v1/volume/csi/{vid}")
        lat.append((time.perf_counter() - t) * 1000)
        if st != 200:
            raise RuntimeError(f"GET /v1/volume/csi/{vid}: {st}")
        time.sleep(max(0.0, 0.01 - (time.perf_counter() - t)))
    return {"p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "max_ms": max(lat), "count": n}


def steady_window(pid, fleet, seconds):
    """CPU (cores) of `pid` over `seconds`, RSS and descriptors at the end, heartbeat round trips."""
    if fleet:
        fleet.ask("stats")  # the round trips since the last look go
    cpu0, t0 = cpu_of(pid), time.monotonic()
    time.sleep(seconds)
    cpu1, t1 = cpu_of(pid), time.monotonic()
    out = {"cores": (cpu1 - cpu0) / 1000 / (t1 - t0), "rss_mib": rss_mib(pid), "fds": open_fds(pid),
           "seconds": t1 - t0}
    if fleet:
        out["heartbeats"] = fleet.ask("stats")
    return out


cpu_of = None  # run_bench.cpu_ms, set by bench_nodes


def fleet_on(rb, c, n, ref):
    """One size: the fleet of `n` on the started control plane `c`; `ref` is the no-fleet figures."""
    burst = min(BURST, n)
    pid = c.cp.pid
    t = time.monotonic()
    f = Fleet(rb, c, n, burst, f"fleet{n}")
    out = {"nodes": n, "certificates_seconds": f.ready["certificates_seconds"], "first": f.ready["register"]}
    watch = None
    try:
        rb.log(f"nodes: {n - burst} nodes registered in {f.ready['register']['seconds']:.1f}s "
               f"(certificates {f.ready['certificates_seconds']:.1f}s); {burst} at once ...")
        out["burst"] = f.ask("burst")
        if out["burst"]["failed"]:
            raise RuntimeError(f"registration refused: {out['burst']['error']}")
        out["connected_seconds"] = time.monotonic() - t
        time.sleep(2 * HEARTBEAT_MS / 1000)  # every node has heartbeated twice since
        out["steady"] = steady_window(pid, f, WINDOW_S)
        out["fleet_process"] = {"rss_mib": rss_mib(f.p.pid), "fds": open_fds(f.p.pid)}
        out["get"] = probe_gets(c, ref["vid"])
        watch = NodeDownWatch(c)
        time.sleep(1.0)
        silenced = f.ask(f"silence {SILENT}")
        last = silenced["last_answered_monotonic_s"]
        ttl_s = (silenced.get("ttl_ms") or TTL_S * 1000) / 1000  # the TTL they were told (paced fleets: longer)
        wait_until(lambda: all(k in watch.down for k in last), ttl_s + 60, 0.1)
        detect = [(watch.down[k] - v) * 1000 for k, v in last.items() if k in watch.down]
        time.sleep(2.0)  # a node wrongly marked down would show up now
        out["down"] = {"ttl_ms": ttl_s * 1000, "detected": len(detect), "silenced": len(last),
                       "p50_ms": percentile(detect, 50),
                       "max_ms": max(detect) if detect else None, "min_ms": min(detect) if detect else None,
                       "false_downs": sorted(k for k in watch.down if k not in last)[:10],
                       "false_down_count": sum(1 for k in watch.down if k not in last), "stream_error": watch.error}
        out["after"] = f.ask("stats")
    finally:
        if watch:
            watch.close()
        f.close()
    return out


def reference(rb, c):
    """The same control plane before any fleet: one simulated node (the volume's plugin), heartbeating
    every 100 ms so that its round trips are a sample (about 100 in the window), not two."""
    f = Fleet(rb, c, 1, 0, "ref", heartbeat_ms=100)
    try:
        vid = "fleet-vol"
        body = {"Volumes": [{"ID": vid, "Name": vid, "PluginID": "sim", "ExternalID": "ext-" + vid,
                             "RequestedCapabilities": [{"AccessMode": "single-node-writer",
                                                        "AttachmentMode": "file-system"}]}]}
        if not wait_until(lambda: c.api.request("GET", "/v1/plugin/csi/sim")[0] == 200, 30, 0.1):
            raise RuntimeError("the reference node's plugin did not register")
        c.api.json("PUT", f"/v1/volume/csi/{vid}", body)
        time.sleep(1.0)
        out = {"vid": vid, "steady": steady_window(c.cp.pid, f, min(WINDOW_S, 10)), "get": probe_gets(c, vid)}
    finally:
        f.close()
    return out


def bench_nodes(rb):
    global cpu_of
    cpu_of = rb.cpu_ms
    for n in SIZES:
        c = rb.new_cluster(f"nodes-{n}")
        try:
            c.start_controlplane()
            ref = reference(rb, c)
            res = fleet_on(rb, c, n, ref)
        finally:
            rb.close_cluster(c)
        rb.details[f"nodes_{n}"] = {"reference": ref, **res}
        rows(rb, n, ref, res)


def rows(rb, n, ref, res):
    s, r = res["steady"], ref["steady"]
    hb, rhb = s["heartbeats"], r["heartbeats"]
    big = n >= 10000  # the targets are set at 10,000 nodes
    rb.row("nodes", f"{n} nodes: control plane CPU, steady", s["cores"], "cores", r["cores"],
           "the same control plane with one node (a heartbeat every 100 ms), same run",
           ("value", "<=", 0.5) if big else None,
           f"{WINDOW_S:.0f} s window; {hb['count'] / WINDOW_S:.0f} heartbeats/s at the agent's pace "
           f"(every {hb.get('interval_ms', 0) / 1000:.2f} s, TTL {hb.get('ttl_ms', 0) / 1000:.0f} s), "
           "a watch open per node")
    rb.row("nodes", f"{n} nodes: control plane RSS", s["rss_mib"], "MiB", r["rss_mib"], "with one node",
           ("value", "<=", 1024) if big else None,
           f"the fleet process: {res['fleet_process']['rss_mib']:.0f} MiB, {res['fleet_process']['fds']} descriptors")
    rb.row("nodes", f"{n} nodes: control plane open descriptors", s["fds"], "", r["fds"], "with one node")
    rb.row("nodes", f"{n} nodes: heartbeat round trip p99", hb["p99_ms"], "ms", rhb["p99_ms"],
           "one node's, same control plane", None,
           f"p50 {hb['p50_ms']:.2f} ms, max {hb['max_ms']:.1f} ms, {hb['count']} heartbeats, {hb['errors']} failed; "
           f"watches open {hb['watches_open']}")
    b = res["burst"]
    rb.row("nodes", f"{n} nodes: {b['nodes']} nodes register at once", b["seconds"] * 1000, "ms", None, "", None,
           f"per node p50 {b['latency']['p50_ms']:.0f} ms, p99 {b['latency']['p99_ms']:.0f} ms; "
           f"{n - b['nodes']} nodes already connected; {b['failed']} refused")
    d = res["down"]
    rb.row("nodes", f"{n} nodes: node-down detection, {d['silenced']} silent (max)", d["max_ms"], "ms",
           d["ttl_ms"], "the TTL the nodes were told (--heartbeat-ttl, paced past --max-heartbeats-per-second)",
           ("value", "<=", d["ttl_ms"] + 1000),
           f"p50 {d['p50_ms']:.0f} ms, min {d['min_ms'] or 0:.0f} ms, {d['detected']} of {d['silenced']} detected; "
           f"nodes wrongly marked down: {d['false_down_count']}")
    if d["detected"] < d["silenced"] or d["false_down_count"]:
        rb.row("nodes", f"{n} nodes: silent nodes missed + live nodes marked down",
               d["silenced"] - d["detected"] + d["false_down_count"], "", None, "", ("value", "<=", 0))
    g, rg = res["get"], ref["get"]
    rb.row("nodes", f"{n} nodes: GET /v1/volume/csi/:id p99", g["p99_ms"], "ms", rg["p99_ms"],
           "the same GETs before the fleet, same control plane", ("ratio", "<=", 1.5),
           f"p50 {g['p50_ms']:.2f} ms beside {rg['p50_ms']:.2f} ms; {g['count']} GETs one at a time, every 10 ms")
