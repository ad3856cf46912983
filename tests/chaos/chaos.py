#!/usr/bin/env python3
"""Claim safety under partitions (issue 43): a Mooring cluster in network namespaces, a seeded
fault schedule, a workload throughout, the whole history recorded, and the checker's verdict.

  chaos.py --build DIR --duration SECONDS --seed N [--out DIR] [--scenario NAME]

Exit: 0 no violation, 1 violations (the report names them), 2 the harness failed, 77 skipped
(not root, no network namespaces, no etcd, binaries missing). With --expect PROPERTY the exit is 0
exactly when the checker reports a violation of that property (the fault-switch scenarios).
The run directory keeps the history (ops.jsonl, events.jsonl, calls/, tasks/, faults.jsonl,
final.json), every process's log (logs/) and the report (report.txt, report.json).
See docs/chaos.md."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checker  # noqa: E402
import faults  # noqa: E402
import netns  # noqa: E402
import scenarios  # noqa: E402
from api import Api, Client, Recorder  # noqa: E402
from cluster import ETCD, MEMBERS, OCTETS, Cluster, binaries, processes_mentioning  # noqa: E402
from history import EventReader, end_state, mounts_under  # noqa: E402
from workload import Workload, read_alloc, read_volume  # noqa: E402

SKIP = 77


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


def say(*args):
    print("chaos:", *args, flush=True)


def prerequisites(build):
    why = netns.netns_usable()
    if why:
        return why
    if not os.path.exists(ETCD):
        return f"{ETCD} is not installed (apt-get install etcd-server; make deps does)"
    missing = [b for b in binaries(build).values() if not os.access(b, os.X_OK)]
    if missing:
        return f"binaries missing: {', '.join(missing)} (make build, or build the test targets)"
    return None


def wait(check, seconds, step=0.2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        v = check()
        if v:
            return v
        time.sleep(step)
    return None


class Harness:
    def __init__(self, args, run_dir):
        self.args = args
        self.dir = run_dir
        self.prefix = f"mchaos{os.getpid()}"
        self.net = netns.Network(self.prefix)
        env = {"MOORING_FAULT_SWITCH": args.fault_switch} if args.fault_switch else {}
        self.cluster = Cluster(run_dir, args.build, self.net, env=env, agent_metrics=args.agent_metrics_addr)
        self.api = None
        self.client = None
        self.urls = {}
        self.events = None
        self.injector = None
        self.workload = None
        self.recorder = Recorder(os.path.join(run_dir, "ops.jsonl"))
        self.info = {"seed": args.seed, "duration": args.duration, "build": os.path.abspath(args.build),
                     "scenario": args.scenario, "fault_switch": args.fault_switch, "prefix": self.prefix,
                     "agent_metrics_addr": args.agent_metrics_addr}

    # ---- who leads ----
    def leader(self):
        """The control plane every reachable member names, by its address; None if none answers."""
        for cp in (f"cp{i}" for i in MEMBERS):
            if not self.cluster.running(cp) or cp in self.cluster.paused:
                continue
            status, _, text, _ = self.api.call(self.urls[cp], "GET", "/v1/status/leader", timeout=2)
            if status == 200:
                addr = text.strip().strip('"')
                for name, url in self.urls.items():
                    if url == addr:
                        return name
        return None

    def etcd_leader(self):
        t = os.path.join(self.cluster.tls, "etcd", "client")
        r = subprocess.run(["etcdctl", "--endpoints", self.cluster.etcd_endpoints(), "--cacert", f"{t}/ca.pem",
                            "--cert", f"{t}/client.pem", "--key", f"{t}/client-key.pem", "--dial-timeout", "2s",
                            "--command-timeout", "3s", "endpoint", "status", "-w", "json"],
                           env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True)
        try:
            for s in json.loads(r.stdout):
                if s["Status"]["header"]["member_id"] == s["Status"]["leader"]:
                    ip = s["Endpoint"].split("//")[-1].split(":")[0]
                    return next(n for n, a in self.net.members.items() if a == ip)
        except (ValueError, KeyError, StopIteration):
            pass
        return None

    # ---- bring-up ----
    def start(self):
        self.net.create(OCTETS)
        netns.InNetns(self.net.ns_path("client")).enter()  # every thread made from now on is inside
        self.cluster.make_pki()
        self.urls = {f"cp{i}": self.cluster.api_url(f"cp{i}") for i in MEMBERS}
        self.api = Api(os.path.join(self.cluster.tls, "ca.pem"), None)
        for i in MEMBERS:
            self.cluster.start_etcd(i)
        for i in MEMBERS:
            self.cluster.start_cp(i)
        leader = wait(lambda: self.leader() or self.exited("etcd0", "etcd1", "etcd2", "cp0", "cp1", "cp2"), 120, 0.5)
        if leader in ("exited", None):
            raise RuntimeError("no control plane became the leader; see logs/")
        status, _, text, _ = self.api.call(self.urls[leader], "POST", "/v1/acl/bootstrap")
        if status != 200:
            raise RuntimeError(f"ACL bootstrap: {status} {text}")
        self.api.token = json.loads(text)["SecretID"]
        with open(os.path.join(self.dir, "bootstrap-token"), "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(self.api.token + "\n")
        self.client = Client(self.api, self.recorder, self.urls)
        for i in MEMBERS:
            self.cluster.start_agent(i)
        ready = wait(lambda: self.plugin_ready() or self.exited("node0", "node1", "node2"), 180, 0.5)
        if ready in ("exited", None):
            raise RuntimeError("the hostpath plugin did not become healthy on all three nodes; see logs/")
        self.events = EventReader(self.api, self.urls, self.leader, os.path.join(self.dir, "events.jsonl"))
        self.events.start()
        say(f"cluster up: leader {leader}; etcd leader {self.etcd_leader()}")

    def exited(self, *names):
        """"exited" when one of them is not running (a bad flag, a missing binary: say so at once)."""
        gone = [n for n in names if not self.cluster.running(n)]
        return "exited" if gone else None

    def plugin_ready(self):
        leader = self.leader()
        if not leader:
            return False
        status, _, text, _ = self.api.call(self.urls[leader], "GET", "/v1/plugin/csi/hostpath", timeout=5)
        if status != 200:
            return False
        p = json.loads(text)
        return p.get("NodesHealthy") == 3 and p.get("ControllersHealthy") == 3

    # ---- the run ----
    def make_workload(self, threads=3):
        return Workload(self.client, self.args.seed, os.path.join(HERE, "task.py"), os.path.join(self.dir, "tasks"),
                        [f"node{i}" for i in MEMBERS], list(self.urls), threads=threads,
                        task_fails_after=self.args.task_fails_after)

    def chaos(self):
        plan = faults.schedule(self.args.seed, self.args.duration)
        with open(os.path.join(self.dir, "schedule.json"), "w") as f:
            json.dump(plan, f, indent=1)
        say(f"seed {self.args.seed}: {len(plan)} faults over {self.args.duration}s: {faults.describe(plan)}")
        self.injector = faults.Injector(self.cluster, self.net, os.path.join(self.dir, "faults.jsonl"),
                                        use_iptables=netns.iptables_usable())
        self.injector.resolve_leader = self.leader
        self.injector.resolve_etcd_leader = self.etcd_leader
        self.workload = self.make_workload()
        t0 = time.monotonic()
        self.info["t0"] = int(t0 * 1e9)
        self.workload.start()
        self.injector.start_thread(plan, t0)
        while time.monotonic() - t0 < self.args.duration:
            time.sleep(1)
            self.progress(t0)
        self.heal()
        # Liveness after healing: the workload goes on for a while on a whole cluster.
        time.sleep(self.args.after_heal)
        self.workload.stop_all_threads()

    def progress(self, t0):
        elapsed = int(time.monotonic() - t0)
        if elapsed % 30 == 0:
            say(f"{elapsed}s: {self.recorder.next_id} ops, {len(self.injector.active)} faults in force, "
                f"event stream reconnects {self.events.reconnects}")

    def heal(self):
        t = self.injector.heal_all() if self.injector else time.monotonic_ns()
        for name in list(self.cluster.procs):
            if name in self.cluster.paused:
                self.cluster.resume(name)
        if self.injector:
            self.injector.supervise()
        self.info["healed"] = t
        say("faults healed; every process running")
        if not wait(self.plugin_ready, 120, 0.5):
            say("warning: the plugin is not healthy on all nodes 120 s after healing")

    def drain(self):
        """Stops every allocation the API knows (in-doubt submits included) and waits for the claims."""
        leader = wait(self.leader, 60, 0.5) or "cp0"
        self.info["drain"] = time.monotonic_ns()
        allocs = self.list_all(leader, "/v1/allocations") or []
        for a in allocs:
            if a.get("DesiredStatus") == "run":
                self.client.op("drain.stop", a.get("Name", ""), leader, "POST", f"/v1/allocation/{a['ID']}/stop",
                               extra={"alloc_id": a["ID"]})
        settled = wait(lambda: self.claims_left(leader) == 0, self.args.drain_timeout, 1.0)
        self.info["drained"] = time.monotonic_ns() if settled else None
        wait(lambda: not processes_mentioning(os.path.join(self.dir, "tasks")), 30, 0.5)
        # The final reads: every object the history names, once, on a healed cluster.
        created = {}
        for op in checker.read_jsonl(os.path.join(self.dir, "ops.jsonl")):
            if op["kind"] == "volume.create":
                created[op["obj"]] = True
        for vid in created:
            read_volume(self.client, vid, leader, kind="volume.read")
        for a in allocs:
            read_alloc(self.client, a.get("Name", ""), a["ID"], leader, kind="alloc.read")
        with open(os.path.join(self.dir, "final.json"), "w") as f:
            json.dump(end_state(self.client, leader, self.cluster, self.dir, self.list_all(leader, "/v1/volumes")), f,
                      indent=1)

    def list_all(self, cp, path):
        """Every page of a list route; None when a page cannot be read."""
        out, token = [], ""
        while True:
            sep = "&" if "?" in path else "?"
            status, headers, text, _ = self.api.call(self.urls[cp], "GET", f"{path}{sep}per_page=500&next_token={token}",
                                                     timeout=30)
            if status != 200:
                return None
            out += json.loads(text)
            token = headers.get("x-mooring-nexttoken", "")
            if not token:
                return out

    def claims_left(self, leader):
        """Claims of every volume (past ones included: the list's stubs count only taken ones)."""
        vols = self.list_all(leader, "/v1/volumes")
        if vols is None:
            return -1
        left = 0
        for v in vols:
            status, _, text, _ = self.api.call(self.urls[leader], "GET", f"/v1/volume/csi/{v['ID']}", timeout=10)
            if status != 200 and status != 404:
                return -1
            left += len(json.loads(text).get("Claims") or []) if status == 200 else 0
        return left

    # ---- teardown: always runs ----
    def teardown(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # the teardown runs to its end
        if self.workload:
            self.workload.stop_all_threads()
        if self.injector:
            self.injector.stop_flag.set()
            if self.injector.thread:
                self.injector.thread.join(timeout=60)
        if self.events:
            time.sleep(2)  # the last events of the drain
            self.events.stop()
        self.net.heal_all()
        self.cluster.stop_all()
        after = {"processes": [argv for _, argv in processes_mentioning(self.dir)], "mounts": mounts_under(self.dir)}
        self.cluster.kill_everything()
        self.cluster.remove_sockets()
        for m in sorted(mounts_under(self.dir), key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        self.net.destroy()
        after["namespaces"] = netns.leftover_namespaces(self.prefix)
        final = os.path.join(self.dir, "final.json")
        if os.path.exists(final):
            with open(final) as f:
                doc = json.load(f)
            doc["after_teardown"] = after
            with open(final, "w") as f:
                json.dump(doc, f, indent=1)
        self.recorder.close()
        with open(os.path.join(self.dir, "run.json"), "w") as f:
            json.dump(self.info, f, indent=1)
        if not self.args.keep:
            for d in ("hostpath", "etcd0", "etcd1", "etcd2", "node0", "node1", "node2", "cp0", "cp1", "cp2"):
                shutil.rmtree(os.path.join(self.dir, d), ignore_errors=True)


def clean_stale():
    """Namespaces and mounts left by a harness that was SIGKILLed (its pid is gone)."""
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith("mchaos") and "-" in name:
            pid = name[len("mchaos"):].split("-")[0]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                subprocess.run(["ip", "netns", "del", name], capture_output=True)


def fresh_run_dir(run_dir):
    """An empty run directory: a previous run's history in it would mix with this one's."""
    if os.path.isdir(run_dir) and os.listdir(run_dir):
        if not os.path.exists(os.path.join(run_dir, "ops.jsonl")) and not os.path.exists(os.path.join(run_dir, "tls")):
            raise SystemExit(f"chaos: {run_dir} holds something else than a chaos run; choose another --out")
        for m in sorted(mounts_under(run_dir), key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(run_dir)
    os.makedirs(run_dir, exist_ok=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build", "release"))
    p.add_argument("--duration", type=float, default=180)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", help="run directory (default: build/chaos/seed-N-TIME)")
    p.add_argument("--after-heal", type=float, default=30, help="seconds of workload after the faults heal")
    p.add_argument("--drain-timeout", type=float, default=120)
    p.add_argument("--scenario", choices=sorted(scenarios.SCENARIOS), help="a fault-switch scenario, no schedule")
    p.add_argument("--fault-switch", help=argparse.SUPPRESS)
    p.add_argument("--expect", help="exit 0 exactly when this property is violated")
    p.add_argument("--task-fails-after", type=float, metavar="S",
                   help="every workload task exits 1 S seconds after it starts (releases close behind claims)")
    p.add_argument("--keep", action="store_true", help="keep the data dirs (etcd, volumes, agents)")
    p.add_argument("--agent-metrics-addr", default="127.0.0.1:4703",
                   help="the agents' metrics address (default: the shipped one; 127.0.0.1:0 steps around an "
                        "agent that cannot restart beside its orphaned plugin, to look further)")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    if args.scenario:
        args.fault_switch = scenarios.SCENARIOS[args.scenario]["switch"]
        args.expect = args.expect or scenarios.SCENARIOS[args.scenario]["expect"]
    why = prerequisites(args.build)
    if why:
        print(f"SKIP: chaos: {why}")
        return SKIP
    clean_stale()
    run_dir = os.path.abspath(args.out or os.path.join(HERE, "..", "..", "build", "chaos",
                                                       f"seed-{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}"))
    fresh_run_dir(run_dir)
    if args.scenario:
        say(f"run directory {run_dir}; scenario {args.scenario} (fault switch {args.fault_switch})")
    else:
        say(f"run directory {run_dir}; replay with: make chaos SEED={args.seed} DURATION={int(args.duration)}")
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    h = Harness(args, run_dir)
    failed = None
    try:
        h.start()
        if args.scenario:
            scenarios.run(args.scenario, h)
        else:
            h.chaos()
        h.drain()
    except (Interrupted, Exception) as e:
        failed = f"{type(e).__name__}: {e}"
        say(f"harness failed: {failed}")
    finally:
        h.teardown()
    report = checker.check(run_dir)
    checker.write_report(run_dir, report)
    print(checker.summary(report), flush=True)
    say(f"history and report in {run_dir} (report.txt)")
    if failed:
        return 2
    if args.expect:
        hit = any(v["property"] == args.expect for v in report["violations"])
        say(f"expected a violation of {args.expect}: {'found' if hit else 'NOT found'}")
        return 0 if hit else 1
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
