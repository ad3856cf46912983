"""The chaos cluster's processes: three etcd members, three control planes and three node agents
(each launching its hostpath plugin), every one in its own network namespace (netns.py), secure
as `make run-ha`: the certificates come from docker/mooring-init.sh (the Mooring CA, the control
planes' server certificate for their addresses, etcd's own CA with its members' and the control
planes' client certificates, one keyring), agents talk mutual TLS with their node's certificate,
the REST API is HTTPS with ACLs on. Every flag not named here is the shipped default (lease 2 s,
heartbeat TTL 10 s, GC retry 30 s), so the run checks what users run.

The processes run in the host's mount namespace (nsenter --net only), so mounts stay visible
to the end-state check and the teardown. Each is started in its own session with a death signal
tied to the harness, and killed, paused and started again by name ("etcd0", "cp1", "node2")."""
import json
import os
import queue
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import start_group  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ETCD = "/usr/bin/etcd"
MEMBERS = (0, 1, 2)
OCTETS = {**{f"etcd{i}": 11 + i for i in MEMBERS}, **{f"cp{i}": 21 + i for i in MEMBERS},
          **{f"node{i}": 31 + i for i in MEMBERS}, "client": 100}


def binaries(build):
    return {"cp": os.path.join(build, "services", "controlplane", "mooring-controlplane"),
            "agent": os.path.join(build, "services", "nodeagent", "mooring-nodeagent"),
            "hostpath": os.path.join(build, "plugins", "hostpath", "mooring-hostpath"),
            "cli": os.path.join(build, "cli", "mooring")}


class Spawner:
    """Starts processes from one thread that lives as long as the harness. The death signal a
    child gets (processes.start_group) fires when the *thread* that forked it ends, so children
    started by a short-lived thread (the fault injector restarting a process) would be stopped
    with it."""

    def __init__(self):
        self.jobs = queue.Queue()
        threading.Thread(target=self.loop, name="spawner", daemon=True).start()

    def loop(self):
        while True:
            fn, box, done = self.jobs.get()
            try:
                box.append(fn())
            except Exception as e:  # handed back to the caller
                box.append(e)
            done.set()

    def run(self, fn):
        box, done = [], threading.Event()
        self.jobs.put((fn, box, done))
        done.wait()
        if isinstance(box[0], Exception):
            raise box[0]
        return box[0]


class Cluster:
    def __init__(self, run_dir, build, net, env=None, log_level="info", agent_metrics="127.0.0.1:4703"):
        self.dir = run_dir
        self.bin = binaries(build)
        self.net = net
        self.env = dict(os.environ, **(env or {}))  # the control planes' (fault switches go here)
        self.log_level = log_level
        self.agent_metrics = agent_metrics
        self.procs = {}   # name -> Popen
        self.spawner = Spawner()
        self.paused = set()
        self.tls = os.path.join(run_dir, "tls")
        self.hostpath = os.path.join(run_dir, "hostpath")
        # The agents' data dirs are reached through short symlinks here: their plugins' unix
        # sockets live in them, a socket path holds at most 107 bytes (the plugin keeps 87), and a
        # run directory under a deep checkout exceeds that.
        self.sockets = tempfile.mkdtemp(prefix="mch-")
        for d in ("logs", "calls", "faults", "tasks", "hostpath"):
            os.makedirs(os.path.join(run_dir, d), exist_ok=True)
        # Tasks write their own records; they may run unprivileged one day.
        os.chmod(os.path.join(run_dir, "tasks"), 0o1777)

    # ---- addresses ----
    def ip(self, name):
        return self.net.address(name)

    def api_url(self, cp):
        return f"https://{self.ip(cp)}:4700"

    def etcd_endpoints(self):
        return ",".join(f"{self.ip(f'etcd{i}')}:2379" for i in MEMBERS)

    # ---- certificates ----
    def make_pki(self):
        args = [os.path.join(ROOT, "docker", "mooring-init.sh"), "tls", "-dir", self.tls,
                "-etcd-dir", os.path.join(self.tls, "etcd"), "-etcd-dns", "localhost",
                "-keyring", os.path.join(self.dir, "keyring")]
        for i in MEMBERS:
            args += ["-ip", self.ip(f"cp{i}"), "-etcd-ip", self.ip(f"etcd{i}")]
        env = dict(os.environ, MOORING=self.bin["cli"])
        r = subprocess.run(args, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"mooring-init.sh tls failed: {r.stderr}")
        for i in MEMBERS:
            subprocess.run([self.bin["cli"], "tls", "cert", "create", "-agent", "-node-id", f"node{i}", "-dir", self.tls],
                           check=True, capture_output=True)

    # ---- processes ----
    def _spawn(self, name, argv, env=None):
        log = open(os.path.join(self.dir, "logs", f"{name}.log"), "a")
        log.write(f"\n==== chaos harness: start {time.monotonic_ns()} ====\n")
        log.flush()
        p = self.spawner.run(lambda: start_group(["/usr/bin/nsenter", f"--net={self.net.ns_path(name)}", "--", *argv],
                                                 stdout=log, stderr=subprocess.STDOUT, env=env or dict(os.environ),
                                                 cwd=self.dir))
        log.close()
        self.procs[name] = p
        self.paused.discard(name)
        return p

    def start(self, name):
        kind = name.rstrip("0123456789")
        i = int(name[len(kind):])
        {"etcd": self.start_etcd, "cp": self.start_cp, "node": self.start_agent}[kind](i)

    def start_etcd(self, i):
        t = os.path.join(self.tls, "etcd", "member")
        ip = self.ip(f"etcd{i}")
        initial = ",".join(f"etcd{j}=https://{self.ip(f'etcd{j}')}:2380" for j in MEMBERS)
        self._spawn(f"etcd{i}", [
            ETCD, "--name", f"etcd{i}", "--data-dir", os.path.join(self.dir, f"etcd{i}"),
            "--listen-client-urls", f"https://{ip}:2379", "--advertise-client-urls", f"https://{ip}:2379",
            "--listen-peer-urls", f"https://{ip}:2380", "--initial-advertise-peer-urls", f"https://{ip}:2380",
            "--initial-cluster", initial, "--initial-cluster-state", "new", "--initial-cluster-token", "mooring-chaos",
            "--cert-file", f"{t}/server.pem", "--key-file", f"{t}/server-key.pem", "--trusted-ca-file", f"{t}/ca.pem",
            "--client-cert-auth", "--peer-cert-file", f"{t}/server.pem", "--peer-key-file", f"{t}/server-key.pem",
            "--peer-trusted-ca-file", f"{t}/ca.pem", "--peer-client-cert-auth"])

    def start_cp(self, i):
        c = os.path.join(self.tls, "etcd", "client")
        ip = self.ip(f"cp{i}")
        self._spawn(f"cp{i}", [
            self.bin["cp"], "--data-dir", os.path.join(self.dir, f"cp{i}"),
            "--state", f"etcd://{self.etcd_endpoints()}/mooring",
            "--etcd-cacert", f"{c}/ca.pem", "--etcd-cert", f"{c}/client.pem", "--etcd-key", f"{c}/client-key.pem",
            "--keyring-file", os.path.join(self.dir, "keyring"),
            "--http-addr", f"{ip}:4700", "--grpc-addr", f"{ip}:4701",
            "--tls-ca-file", f"{self.tls}/ca.pem", "--tls-cert-file", f"{self.tls}/server.pem",
            "--tls-key-file", f"{self.tls}/server-key.pem", "--log-level", self.log_level], env=self.env)

    def agent_config(self, i):
        node = f"node{i}"
        return {
            "node_name": node, "node_id": node,
            "tls_ca_file": f"{self.tls}/ca.pem", "tls_cert_file": f"{self.tls}/agent-{node}.pem",
            "tls_key_file": f"{self.tls}/agent-{node}-key.pem",
            "data_dir": self.short_data_dir(node),
            "controlplane_addr": ",".join(f"{self.ip(f'cp{j}')}:4701" for j in MEMBERS),
            "grpc_addr": f"{self.ip(node)}:4702", "metrics_addr": self.agent_metrics,
            "log_level": self.log_level, "drain_on_shutdown": "20s",
            # Tasks run as root outside the walls, as before issue 41: they append their records
            # to the run directory, which a walled task sees read-only, and an unwalled non-root
            # task cannot reach its volume under the agent's 0700 mounts directory. The walls
            # and the default user are e2e_isolation_test's; this harness checks claims.
            "task_isolation": False, "allow_root": True, "user_denylist": [], "task_user": "root",
            "plugins": [{"id": "hostpath", "type": "monolith", "command": self.bin["hostpath"],
                         "args": ["--mode", "monolith", "--data-dir", self.hostpath, "--node-id", f"csi-{node}",
                                  "--log-level", self.log_level,
                                  "--call-log", os.path.join(self.dir, "calls", f"{node}.jsonl"),
                                  "--fault-file", self.fault_file(node)]}],
        }

    def fault_file(self, node):
        return os.path.join(self.dir, "faults", f"{node}.json")

    def start_agent(self, i):
        path = os.path.join(self.dir, f"agent-node{i}.json")
        with open(path, "w") as f:
            json.dump(self.agent_config(i), f, indent=2)
        self._spawn(f"node{i}", [self.bin["agent"], "--config", path])

    def running(self, name):
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def pid(self, name):
        return self.procs[name].pid if self.running(name) else None

    def kill(self, name):
        p = self.procs.get(name)
        if p and p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        self.paused.discard(name)

    def pause(self, name):
        if self.running(name):
            os.kill(self.procs[name].pid, signal.SIGSTOP)
            self.paused.add(name)

    def resume(self, name):
        if self.running(name):
            os.kill(self.procs[name].pid, signal.SIGCONT)
        self.paused.discard(name)

    def plugin_pids(self, node):
        """The node's hostpath plugin processes (orphans of killed agents included)."""
        want = f"csi-{node}"
        out = []
        for pid, args in processes_mentioning(self.hostpath):
            if os.path.basename(args[0]) == "mooring-hostpath" and want in args:
                out.append(pid)
        return out

    def stop_all(self):
        """Agents first (they stop their tasks and unmount), then control planes, then etcd."""
        order = [f"node{i}" for i in MEMBERS] + [f"cp{i}" for i in MEMBERS] + [f"etcd{i}" for i in MEMBERS]
        for name in order:
            if name in self.paused:
                self.resume(name)
        for group in (order[:3], order[3:6], order[6:]):
            for name in group:
                if self.running(name):
                    os.kill(self.procs[name].pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            for name in group:
                p = self.procs.get(name)
                if not p:
                    continue
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()

    def short_data_dir(self, node):
        """The agent's data dir (in the run directory) by a short symlink: its plugins' sockets
        live there, and mounts resolve the link, so they still show under the run directory."""
        real, link = os.path.join(self.dir, node), os.path.join(self.sockets, node)
        os.makedirs(real, exist_ok=True)
        if not os.path.islink(link):
            os.symlink(real, link)
        return link

    def remove_sockets(self):
        shutil.rmtree(self.sockets, ignore_errors=True)

    def kill_everything(self):
        """The last resort of the teardown: every process of this run, whoever started it."""
        for name, p in self.procs.items():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for pid, _ in processes_mentioning(self.dir):
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def processes_mentioning(text):
    """(pid, argv) of every process whose command line or environment names `text` (the run dir):
    the plugins by their flags, the tasks by their record directory."""
    out = []
    mine = ancestors()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if args and any(text in a for a in args):
            out.append((int(entry), args))
    return out


def ancestors():
    """This process and its parents (a wrapper such as `timeout` names the run dir too)."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out
