"""The seeded fault schedule and its executor. `schedule(seed, duration)` is a pure function of
its arguments: the same seed gives the same faults at the same offsets on the same targets
(roles such as "the control plane leader" are resolved when the fault starts, and the record
says whom it hit). Each fault starts, lasts, and heals; every start and heal is appended to
faults.jsonl with CLOCK_MONOTONIC times.

Kinds:
  partition-agent   node i <-> every control plane, both directions (iptables in the node's namespace);
                    two in five last 28-40 s, long enough for the node to be lost
  leader-etcd       the control plane leader <-> every etcd member; agents still reach it
  isolate-cp        one control plane <-> the other two (it still sees etcd and the agents)
  one-way           packets from A to B dropped, B to A delivered (A's OUTPUT)
  link-down         a member's port on the bridge down: it reaches no one
  kill              kill -9, started again when the fault heals (etcd members, the etcd raft leader,
                    control planes, the control plane leader, agents)
  pause             SIGSTOP .. SIGCONT, longer than the lease (2 s) and often the heartbeat TTL (10 s)
  plugin-kill       kill -9 of a node's hostpath plugin (its agent starts it again)
  plugin-exit       the plugin exits in the middle of its next call of one RPC (hostpath fault file)
  csi-errors        one RPC of a plugin fails UNAVAILABLE or is slowed, for the fault's length
"""
import json
import random
import threading
import time

NODES = ("node0", "node1", "node2")
CPS = ("cp0", "cp1", "cp2")
ETCDS = ("etcd0", "etcd1", "etcd2")
RPCS = ("NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume",
        "ControllerPublishVolume", "ControllerUnpublishVolume", "CreateVolume", "DeleteVolume")

KINDS = [  # (kind, weight)
    ("partition-agent", 4), ("leader-etcd", 3), ("isolate-cp", 2), ("one-way", 3), ("link-down", 2),
    ("kill", 5), ("pause", 3), ("plugin-kill", 2), ("plugin-exit", 2), ("csi-errors", 2)]


def _target(rng, kind):
    if kind == "partition-agent":
        return rng.choice(NODES)
    if kind == "leader-etcd":
        return "cp-leader"
    if kind == "isolate-cp":
        return rng.choice(CPS + ("cp-leader",))
    if kind == "one-way":
        src, dst = rng.choice([(NODES, CPS), (CPS, NODES), (CPS, ETCDS), (ETCDS, ETCDS), (CPS, CPS)])
        a = rng.choice(src)
        b = rng.choice([x for x in dst if x != a])
        return f"{a}>{b}"
    if kind == "link-down":
        return rng.choice(NODES + CPS + ETCDS)
    if kind == "kill":
        return rng.choice(NODES + CPS + ETCDS + ("cp-leader", "cp-leader", "etcd-leader"))
    if kind == "pause":
        return rng.choice(NODES + ("cp-leader", "cp-leader") + ETCDS)
    if kind in ("plugin-kill", "plugin-exit", "csi-errors"):
        return rng.choice(NODES)
    raise ValueError(kind)


def schedule(seed, duration, start_after=5.0, gap=(2.0, 9.0), length=(2.0, 16.0)):
    """Faults for a run of `duration` seconds: [{"n", "at", "kind", "target", "length", ...}]."""
    rng = random.Random(f"faults-{seed}")
    out, t, n = [], start_after, 0
    kinds, weights = [k for k, _ in KINDS], [w for _, w in KINDS]
    while True:
        t += rng.uniform(*gap)
        kind = rng.choices(kinds, weights)[0]
        f = {"n": n, "at": round(t, 2), "kind": kind, "target": _target(rng, kind),
             "length": round(rng.uniform(*length), 2)}
        if kind == "pause" and rng.random() < 0.5:
            f["length"] = round(rng.uniform(11, 18), 2)  # beyond the heartbeat TTL
        if kind == "partition-agent" and rng.random() < 0.4:
            # Beyond the heartbeat TTL and the workload's StopAfterClientDisconnect (10 s + 15 s):
            # the node is lost, its allocations stopped on both sides, their claims freed.
            f["length"] = round(rng.uniform(28, 40), 2)
        if kind in ("plugin-exit", "csi-errors"):
            f["rpc"] = rng.choice(RPCS)
            f["delay"] = kind == "csi-errors" and rng.random() < 0.3
        if t + f["length"] > duration:
            return out
        out.append(f)
        n += 1


def describe(faults):
    counts = {}
    for f in faults:
        counts[f["kind"]] = counts.get(f["kind"], 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


class Injector:
    """Runs a schedule against the cluster; `heal_all` ends everything still in force."""

    def __init__(self, cluster, net, log_path, use_iptables=True):
        self.cluster = cluster
        self.net = net
        self.log = open(log_path, "a", buffering=1)
        self.lock = threading.Lock()
        self.active = {}  # n -> (fault, resolved target, undo)
        self.busy = set()  # members a fault holds (no two faults on one member at once)
        self.use_iptables = use_iptables
        self.stop_flag = threading.Event()
        self.thread = None
        self.resolve_leader = None  # set by the harness: () -> "cpN" or None
        self.resolve_etcd_leader = None

    def record(self, what, f, **fields):
        with self.lock:
            self.log.write(json.dumps({"ev": what, "t": time.monotonic_ns(), "n": f["n"], "kind": f["kind"],
                                       "target": f["target"], **fields}) + "\n")

    def resolve(self, target):
        if target == "cp-leader":
            return self.resolve_leader() if self.resolve_leader else None
        if target == "etcd-leader":
            return self.resolve_etcd_leader() if self.resolve_etcd_leader else None
        return target

    def members_of(self, f, target):
        if f["kind"] == "one-way":
            return set(target.split(">"))
        if f["kind"] in ("plugin-kill", "plugin-exit", "csi-errors"):
            return {target + "-plugin"}
        if f["kind"] == "leader-etcd":
            return {target}
        return {target}

    def start(self, f):
        target = f["target"]
        if f["kind"] == "one-way":
            a, b = target.split(">")
            a, b = self.resolve(a), self.resolve(b)
            target = f"{a}>{b}" if a and b else None
        else:
            target = self.resolve(target)
        if not target:
            self.record("skip", f, why="no such member now (no leader?)")
            return
        members = self.members_of(f, target)
        if members & self.busy or (f["kind"] in ("partition-agent", "leader-etcd", "isolate-cp", "one-way")
                                   and not self.use_iptables):
            self.record("skip", f, why="target busy with another fault" if members & self.busy else "no iptables")
            return
        undo = self.apply(f, target)
        self.busy |= members
        self.active[f["n"]] = (f, target, undo, members)
        self.record("start", f, resolved=target)

    def apply(self, f, target):
        c, net, kind, fid = self.cluster, self.net, f["kind"], f"fault{f['n']}"
        if kind == "partition-agent":
            net.drop(fid, target, CPS)
            return lambda: net.undrop(fid)
        if kind == "leader-etcd":
            net.drop(fid, target, ETCDS)
            return lambda: net.undrop(fid)
        if kind == "isolate-cp":
            net.drop(fid, target, [x for x in CPS if x != target])
            return lambda: net.undrop(fid)
        if kind == "one-way":
            a, b = target.split(">")
            net.drop(fid, a, [b], outbound=True, inbound=False)
            return lambda: net.undrop(fid)
        if kind == "link-down":
            net.cut_link(target)
            return lambda: net.heal_link(target)
        if kind == "kill":
            c.kill(target)
            return lambda: c.start(target)
        if kind == "pause":
            c.pause(target)
            return lambda: c.resume(target)
        if kind == "plugin-kill":
            for pid in c.plugin_pids(target):
                kill9(pid)
            return lambda: None
        if kind in ("plugin-exit", "csi-errors"):
            rule = {"rpc": f["rpc"]}
            if kind == "plugin-exit":
                rule.update(exit=True, count=1)
            elif f.get("delay"):
                rule["delay_ms"] = 3000
            else:
                rule["code"] = 14
            write_faults(c.fault_file(target), [rule])
            return lambda: write_faults(c.fault_file(target), [])
        raise ValueError(kind)

    def heal(self, n):
        f, target, undo, members = self.active.pop(n)
        try:
            undo()
            self.record("heal", f, resolved=target)
        except Exception as e:
            self.record("heal-failed", f, resolved=target, error=str(e))
        self.busy -= members

    def supervise(self):
        """A process that exited while no fault had killed it is recorded and started again, as
        systemd or a Deployment would: a crash is a finding, not the end of the run."""
        killed = {target for f, target, _, _ in self.active.values() if f["kind"] == "kill"}
        for name, p in list(self.cluster.procs.items()):
            if name in killed or p.poll() is None:
                continue
            with self.lock:
                self.log.write(json.dumps({"ev": "exited", "t": time.monotonic_ns(), "member": name,
                                           "code": p.returncode}) + "\n")
            self.cluster.start(name)

    def run(self, faults, t0):
        """Plays `faults` from monotonic time t0 (seconds) until done or stopped."""
        ends = []  # (time, n)
        pending = sorted(faults, key=lambda f: f["at"])
        while not self.stop_flag.is_set() and (pending or ends):
            self.supervise()
            now = time.monotonic() - t0
            ends.sort()
            if ends and ends[0][0] <= now:
                self.heal(ends.pop(0)[1])
                continue
            if pending and pending[0]["at"] <= now:
                f = pending.pop(0)
                try:
                    self.start(f)
                except Exception as e:
                    self.record("start-failed", f, error=str(e))
                if f["n"] in self.active:
                    ends.append((now + f["length"], f["n"]))
                continue
            nxt = min([e[0] for e in ends] + [p["at"] for p in pending[:1]])
            self.stop_flag.wait(max(0.01, min(0.5, nxt - now)))

    def start_thread(self, faults, t0):
        self.thread = threading.Thread(target=self.run, args=(faults, t0), name="faults", daemon=True)
        self.thread.start()

    def heal_all(self):
        self.stop_flag.set()
        if self.thread:
            self.thread.join(timeout=60)
        for n in list(self.active):
            self.heal(n)
        for node in NODES:
            write_faults(self.cluster.fault_file(node), [])
        self.net.heal_all()
        t = time.monotonic_ns()
        with self.lock:
            self.log.write(json.dumps({"ev": "heal-all", "t": t}) + "\n")
        return t


def kill9(pid):
    import os
    import signal
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def write_faults(path, rules):
    """Atomically (temp + rename): the plugin reads the file on every call."""
    import os
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"rules": rules}, f)
    os.replace(tmp, path)
