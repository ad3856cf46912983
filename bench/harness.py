"""Bench harness: a Mooring cluster on this machine from the real Release binaries.

One mooring-controlplane (real HTTP, gRPC, SQLite), node agents (mooring-nodeagent), each
launching its own mooring-hostpath plugin with real bind mounts, a call log and a fault file.
Secure like `make run` unless asked otherwise: a CA and certificates made with `mooring tls`,
mutual TLS between the services, HTTPS for the REST API, ACLs on and bootstrapped (every request
carries the management token). Cluster(secure=False) is the plaintext stack (--insecure
--acl=false), for comparison.
Everything lives in one temp dir under /tmp; close() (also on failure, Ctrl-C or SIGTERM)
stops every process it started, unmounts whatever is left below the dir and removes it.
Python standard library only.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time


def now_ms():
    return time.time() * 1000.0


def read_status(pid):
    """VmRSS / VmHWM of a process in MiB (None when it is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(val.split()[0]) / 1024.0
    except OSError:
        return None
    return out


def percentile(values, p):
    """Nearest-rank percentile (the C++ side uses the same rule)."""
    if not values:
        return 0.0
    s = sorted(values)
    rank = max(1, min(len(s), int(-(-p * len(s) // 100))))
    return s[rank - 1]


def tls_client_context(ca_file):
    """Checks the server against the bench's CA (and the host name, 127.0.0.1 is in the SANs)."""
    return ssl.create_default_context(cafile=ca_file)


class Api:
    """Keep-alive HTTP/1.1 (or HTTPS, with `ca_file`) client, one connection per thread; sends
    `token` as X-Mooring-Token when set."""

    def __init__(self, port, ca_file=None, token=None):
        self.port = port
        self.token = token
        self.timeout = 60  # seconds per request
        self.context = tls_client_context(ca_file) if ca_file else None
        self.local = threading.local()

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            if self.context:
                c = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=self.timeout, context=self.context)
            else:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            self.local.conn = c
        return c

    def headers(self, has_body=False):
        h = {"Content-Type": "application/json"} if has_body else {}
        if self.token:
            h["X-Mooring-Token"] = self.token
        return h

    def request(self, method, path, body=None):
        data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
        for attempt in range(2):
            c = self._conn()
            try:
                c.request(method, path, body=data, headers=self.headers(bool(data)))
                r = c.getresponse()
                payload = r.read()
                return r.status, r.headers, payload
            except (ConnectionError, http.client.HTTPException, OSError):
                c.close()
                self.local.conn = None
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def json(self, method, path, body=None, ok=(200,)):
        st, hdr, payload = self.request(method, path, body)
        if st not in ok:
            raise RuntimeError(f"{method} {path}: {st} {payload[:300]!r}")
        return json.loads(payload) if payload else None

    def get_blocking(self, path, index, wait="10s"):
        """A blocking query; returns (json, index)."""
        sep = "&" if "?" in path else "?"
        target = f"{path}{sep}index={index}&wait={wait}" if index else path
        st, hdr, payload = self.request("GET", target)
        if st != 200:
            raise RuntimeError(f"GET {target}: {st} {payload[:300]!r}")
        return json.loads(payload), int(hdr.get("X-Mooring-Index", "0") or 0)


class Proc:
    def __init__(self, args, log_path):
        self.args = args
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)

    @property
    def pid(self):
        return self.p.pid

    def running(self):
        return self.p.poll() is None

    def output(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def signal(self, sig):
        if self.running():
            try:
                os.kill(self.p.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout=15.0):
        """SIGTERM, wait, SIGKILL. Returns seconds until exit."""
        t0 = time.perf_counter()
        self.signal(signal.SIGTERM)
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.p.wait()
        self.log.close()
        return time.perf_counter() - t0

    def kill(self):
        self.signal(signal.SIGKILL)
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


class Cluster:
    """Control plane + node agents (each with a hostpath plugin) in one temp dir."""

    def __init__(self, bindir, name="mooring-bench", logs_dir=None, secure=True, metrics=True):
        self.bindir = bindir
        self.logs_dir = logs_dir
        self.secure = secure
        # metrics=False: both services run with --metrics=off (the bench's reference for their cost).
        self.metrics = metrics
        self.agent_extra = [] if metrics else ["--metrics=off"]
        self.dir = tempfile.mkdtemp(prefix=name + "-", dir="/tmp")
        os.makedirs(os.path.join(self.dir, "hostpath"))
        os.makedirs(os.path.join(self.dir, "cp"))
        self.cp = None
        self.api = None
        self.token = None  # the management token, once bootstrapped
        self.http_port = 0
        self.grpc_port = 0
        self.nodes = {}
        self.closed = False
        self.tls_dir = os.path.join(self.dir, "tls")
        if secure:
            self.mooring("tls", "ca", "create", "-dir", self.tls_dir)
            self.mooring("tls", "cert", "create", "-server", "-dir", self.tls_dir)

    FOLDERS = {"mooring-controlplane": "services/controlplane", "mooring-nodeagent": "services/nodeagent",
               "mooring-hostpath": "plugins/hostpath", "mooring": "cli"}

    def bin(self, name):
        return os.path.join(self.bindir, self.FOLDERS.get(name, "bench"), name)

    def mooring(self, *args):
        """Runs the CLI (certificates); raises with its stderr when it fails."""
        p = subprocess.run([self.bin("mooring"), *args], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"mooring {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def tls_file(self, name):
        return os.path.join(self.tls_dir, name)

    @property
    def ca_file(self):
        return self.tls_file("ca.pem") if self.secure else None

    @property
    def scheme(self):
        return "https" if self.secure else "http"

    def tls_args(self, cert):
        """The --tls-* flags for a service presenting `cert` (a base name in tls/), or --insecure."""
        if not self.secure:
            return ["--insecure"]
        return ["--tls-ca-file", self.tls_file("ca.pem"), "--tls-cert-file", self.tls_file(cert + ".pem"),
                "--tls-key-file", self.tls_file(cert + "-key.pem")]

    # ---- control plane ----
    def start_controlplane(self, extra=()):
        runs = self.cp_runs = getattr(self, "cp_runs", 0) + 1
        args = [self.bin("mooring-controlplane"), "--data-dir", os.path.join(self.dir, "cp"),
                "--http-addr", f"127.0.0.1:{self.http_port}", "--grpc-addr", f"127.0.0.1:{self.grpc_port}",
                "--shutdown-grace", "2s", *self.tls_args("server"), *([] if self.secure else ["--acl=false"]),
                *([] if self.metrics else ["--metrics=off"]), *extra]
        # Diagnosis only: MOORING_BENCH_CP_WRAP="heaptrack -o /tmp/cp" (or "perf record -g -o ...")
        # runs the control plane under that tool. Its CPU, RSS and descriptor figures are then the
        # wrapper's process, not the control plane's: a wrapped run profiles, it does not measure.
        wrap = os.environ.get("MOORING_BENCH_CP_WRAP", "").split()
        self.cp = Proc([*wrap, *args], os.path.join(self.dir, "controlplane.log"))

        def ports():
            out = self.cp.output()
            h = re.findall(r"http api listening.*?port=(\d+)", out)
            g = re.findall(r"grpc api listening.*?port=(\d+)", out)
            return (int(h[runs - 1]), int(g[runs - 1])) if len(h) >= runs and len(g) >= runs else None

        if not wait_until(lambda: ports() or not self.cp.running(), 60) or not ports():
            raise RuntimeError("control plane did not start:\n" + self.cp.output()[-3000:])
        self.http_port, self.grpc_port = ports()
        self.api = Api(self.http_port, self.ca_file, self.token)
        if self.secure and not self.token:  # first start: the one bootstrap, as `make run` does
            self.token = self.api.json("POST", "/v1/acl/bootstrap")["SecretID"]
            self.api.token = self.token

    # ---- nodes ----
    def node_dir(self, nid):
        return os.path.join(self.dir, nid)

    def plugin_socket(self, nid):
        return os.path.join(self.node_dir(nid), "agent", "plugins", "hostpath", "csi.sock")

    def call_log(self, nid):
        return os.path.join(self.dir, f"calls-{nid}.jsonl")

    def fault_file(self, nid):
        return os.path.join(self.dir, f"faults-{nid}.json")

    def plugin_args(self, nid):
        """mooring-hostpath's flags for node `nid` (shared data dir, its call log and fault file)."""
        return ["--data-dir", os.path.join(self.dir, "hostpath"), "--node-id", "csi-" + nid,
                "--call-log", self.call_log(nid), "--fault-file", self.fault_file(nid)]

    def start_node(self, nid, heartbeat="1s", probe_interval="500ms", extra_plugin="", config_plugin=True,
                   plugin_mode="monolith"):
        """An agent for `nid`; with config_plugin=False it runs no plugin of its own (plugins come as
        allocations) and is waited for until the control plane lists it ready. plugin_mode="node":
        the hostpath plugin serves no controller (volumes are registered without asking one)."""
        os.makedirs(self.node_dir(nid), exist_ok=True)
        if self.secure and not os.path.exists(self.tls_file(f"agent-{nid}.pem")):
            self.mooring("tls", "cert", "create", "-agent", "-node-id", nid, "-dir", self.tls_dir)
        plugin = (f"hostpath,type={plugin_mode},command=" + self.bin("mooring-hostpath") +
                  f",arg=--mode,arg={plugin_mode}" +
                  ",arg=--data-dir,arg=" + os.path.join(self.dir, "hostpath") +
                  ",arg=--node-id,arg=csi-" + nid +
                  ",arg=--call-log,arg=" + self.call_log(nid) +
                  ",arg=--fault-file,arg=" + self.fault_file(nid) +
                  f",probe_interval={probe_interval},health_timeout=10s" + extra_plugin)
        args = [self.bin("mooring-nodeagent"), "--node-id", nid, "--node-name", nid,
                "--data-dir", os.path.join(self.node_dir(nid), "agent"),
                # A fixed free port, not ":0": the agent advertises the configured address (see run_bench's report).
                "--controlplane-addr", f"127.0.0.1:{self.grpc_port}", "--grpc-addr", f"127.0.0.1:{free_port()}",
                "--metrics-addr", "127.0.0.1:0", *self.agent_extra,
                "--heartbeat-interval", heartbeat, *(["--plugin", plugin] if config_plugin else []),
                *self.tls_args(f"agent-{nid}")]
        self.nodes[nid] = Proc(args, os.path.join(self.dir, f"{nid}.log"))
        if config_plugin:
            self.wait_node_healthy(nid)
        elif not wait_until(lambda: self.node_ready(nid), 60, 0.1):
            raise RuntimeError(f"node {nid} did not become ready:\n" + self.nodes[nid].output()[-3000:])

    def node_healthy(self, nid):
        st, _, body = self.api.request("GET", "/v1/plugin/csi/hostpath")
        if st != 200:
            return False
        p = json.loads(body)
        n = (p.get("Nodes") or {}).get(nid)
        if not n or not n.get("Healthy"):
            return False
        st, _, body = self.api.request("GET", f"/v1/node/{nid}")
        if st != 200:
            return False
        n = json.loads(body)
        # The agent first registers its configured address ("127.0.0.1:0") and advertises the
        # bound port on a later heartbeat: wait for that, or the control plane cannot call it.
        return n.get("Status") == "ready" and not n.get("Address", "").endswith(":0")

    def node_ready(self, nid):
        st, _, body = self.api.request("GET", f"/v1/node/{nid}")
        if st != 200:
            return False
        n = json.loads(body)
        return n.get("Status") == "ready" and not n.get("Address", "").endswith(":0")

    def wait_node_healthy(self, nid, timeout=60):
        if not wait_until(lambda: self.node_healthy(nid), timeout, 0.1):
            raise RuntimeError(f"node {nid} did not become healthy:\n" + self.nodes[nid].output()[-3000:])

    def plugin_pid(self, nid):
        want = ["--node-id", "csi-" + nid]
        hp = os.path.join(self.dir, "hostpath")
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            args = [a.decode(errors="replace") for a in args]
            if not args or os.path.basename(args[0]) != "mooring-hostpath" or hp not in args:
                continue
            if any(args[i:i + 2] == want for i in range(len(args) - 1)):
                return int(name)
        return 0

    def set_faults(self, nid, rules):
        tmp = self.fault_file(nid) + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"rules": rules}, f)
        os.replace(tmp, self.fault_file(nid))

    def calls(self, nid):
        out = []
        try:
            with open(self.call_log(nid)) as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
        except OSError:
            pass
        return out

    # ---- API helpers ----
    def create_volume(self, vid, capacity=1 << 20):
        body = {"Volumes": [{"ID": vid, "Name": vid, "PluginID": "hostpath", "RequestedCapacityMin": capacity,
                             "RequestedCapabilities": [{"AccessMode": "single-node-writer",
                                                        "AttachmentMode": "file-system"}]}]}
        self.api.json("PUT", f"/v1/volume/csi/{vid}/create", body)

    def run_alloc(self, name, vid, node, script=None):
        a = {"Name": name, "NodeID": node,
             "Volumes": {"data": {"Type": "csi", "Source": vid, "AccessMode": "single-node-writer",
                                  "AttachmentMode": "file-system"}}}
        if script is not None:
            a["Task"] = {"Command": "/bin/sh", "Args": ["-c", script], "KillTimeout": "2s"}
        return self.api.json("POST", "/v1/allocations", {"Allocation": a})["ID"]

    def stop_alloc(self, aid):
        self.api.json("POST", f"/v1/allocation/{aid}/stop")

    def wait_alloc_status(self, aid, want=("running",), timeout=60):
        deadline = time.monotonic() + timeout
        index = 0
        while time.monotonic() < deadline:
            a, index = self.api.get_blocking(f"/v1/allocation/{aid}", index, "5s")
            st = a.get("ClientStatus")
            if st in want:
                return a
            if st in ("failed", "lost") and st not in want:
                raise RuntimeError(f"allocation {aid} is {st}: {json.dumps(a.get('Events', []))[-1500:]}")
        raise RuntimeError(f"allocation {aid} not {want} after {timeout}s")

    def wait_volume_free(self, vid, timeout=60):
        deadline = time.monotonic() + timeout
        index = 0
        while time.monotonic() < deadline:
            v, index = self.api.get_blocking(f"/v1/volume/csi/{vid}", index, "5s")
            if not v.get("Claims"):
                return v
        raise RuntimeError(f"volume {vid} still claimed after {timeout}s: {json.dumps(v.get('Claims'))[:1500]}")

    # ---- teardown ----
    def mounts_below(self):
        out = []
        try:
            with open("/proc/self/mountinfo") as f:
                for line in f:
                    mp = line.split()[4].encode().decode("unicode_escape")
                    if mp == self.dir or mp.startswith(self.dir + "/"):
                        out.append(mp)
        except OSError:
            pass
        return out

    def unmount_all(self):
        for _ in range(5):
            mps = self.mounts_below()
            if not mps:
                return
            for mp in sorted(mps, key=lambda m: m.count("/"), reverse=True):
                if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
                    subprocess.run(["umount", "-l", mp], capture_output=True)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for nid, n in self.nodes.items():
            pid = self.plugin_pid(nid)
            if pid:  # a frozen plugin must be able to die
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass
            if n.running():
                n.stop(15)
        for nid in self.nodes:
            pid = self.plugin_pid(nid)
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if self.cp and self.cp.running():
            self.cp.stop(20)
        if self.logs_dir:  # keep the logs for a look afterwards; the temp dir goes
            shutil.rmtree(self.logs_dir, ignore_errors=True)
            os.makedirs(self.logs_dir, exist_ok=True)
            for f in os.listdir(self.dir):
                if f.endswith(".log") or f.endswith(".jsonl"):
                    try:
                        shutil.copyfile(os.path.join(self.dir, f), os.path.join(self.logs_dir, f))
                    except OSError:
                        pass
        self.unmount_all()
        if self.mounts_below():
            print(f"bench: WARNING: mounts left below {self.dir}; not removing it")
            return
        shutil.rmtree(self.dir, ignore_errors=True)


class EtcdCluster:
    """A real etcd cluster (Debian's /usr/bin/etcd) of `members` on free loopback ports, each with
    its own data dir under `d`; plaintext on loopback, as scripts/run-ha.sh runs it. kill(i) is
    SIGKILL, start(i) brings that member back on the same ports and data."""

    ETCD = "/usr/bin/etcd"

    def __init__(self, d, members=3, name="etcd"):
        self.dir = d
        self.ports = [(free_port(), free_port()) for _ in range(members)]
        self.name = name
        self.initial = ",".join(f"{name}{i}=http://127.0.0.1:{p[1]}" for i, p in enumerate(self.ports))
        self.procs = [None] * members
        self.starts = [0] * members

    @staticmethod
    def unavailable():
        return None if os.access(EtcdCluster.ETCD, os.X_OK) else "etcd is not installed (apt-get install etcd-server)"

    def log_path(self, i):
        return os.path.join(self.dir, f"{self.name}{i}.log")

    def spawn(self, i):
        client, peer = (f"http://127.0.0.1:{p}" for p in self.ports[i])
        args = [self.ETCD, "--name", f"{self.name}{i}", "--data-dir", os.path.join(self.dir, f"{self.name}{i}.data"),
                "--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
                "--initial-advertise-peer-urls", peer, "--initial-cluster", self.initial,
                "--initial-cluster-state", "new", "--initial-cluster-token", "mooring-bench"]
        self.procs[i] = Proc(args, self.log_path(i))
        self.starts[i] += 1

    def wait_ready(self, i, timeout=30):
        p, want = self.procs[i], self.starts[i]
        if not wait_until(lambda: p.output().count("ready to serve client requests") >= want or not p.running(),
                          timeout) or not p.running():
            raise RuntimeError(f"etcd member {i} did not become ready:\n" + p.output()[-2000:])

    def start(self, i=None):
        members = range(len(self.ports)) if i is None else [i]
        for m in members:
            self.spawn(m)
        for m in members:
            self.wait_ready(m)

    def kill(self, i):
        if self.procs[i]:
            self.procs[i].kill()

    def pids(self):
        return [p.pid for p in self.procs if p and p.running()]

    def url(self, prefix="/mooring"):
        return "etcd://" + ",".join(f"127.0.0.1:{p[0]}" for p in self.ports) + prefix

    def close(self):
        for p in self.procs:
            if p and p.running():
                p.stop(10)


class HaCluster(Cluster):
    """Control planes (`members`, default three) on one etcd state (`etcd_url`), as scripts/run-ha.sh
    starts them: fixed ports (they advertise them to each other), one keyring file, the same
    server certificate (127.0.0.1 is in its SANs), ACLs bootstrapped once through the leader.
    `api_of(i)` talks to member i; a standby forwards to the leader."""

    def __init__(self, bindir, etcd_url, members=3, lease="2s", **kw):
        super().__init__(bindir, **kw)
        self.etcd_url = etcd_url
        self.lease = lease
        self.members = [{"http": free_port(), "grpc": free_port(), "proc": None} for _ in range(members)]
        for i in range(members):
            os.makedirs(os.path.join(self.dir, f"cp{i}"), exist_ok=True)

    def start_member(self, i, wait=True):
        m = self.members[i]
        args = [self.bin("mooring-controlplane"), "--data-dir", os.path.join(self.dir, f"cp{i}"),
                "--state", self.etcd_url, "--keyring-file", os.path.join(self.dir, "keyring"),
                "--leader-lease", self.lease, "--http-addr", f"127.0.0.1:{m['http']}",
                "--grpc-addr", f"127.0.0.1:{m['grpc']}", "--advertise-grpc-addr", f"127.0.0.1:{m['grpc']}",
                "--shutdown-grace", "2s", *self.tls_args("server"), *([] if self.secure else ["--acl=false"]),
                *([] if self.metrics else ["--metrics=off"])]
        m["proc"] = Proc(args, os.path.join(self.dir, f"controlplane{i}.log"))
        if i == 0 and not os.path.exists(os.path.join(self.dir, "keyring")):
            # The first start writes the shared keyring; the others read it.
            wait_until(lambda: os.path.exists(os.path.join(self.dir, "keyring")) or not m["proc"].running(), 30)
        if wait and not wait_until(lambda: self.leader_of(i) is not None or not m["proc"].running(), 60, 0.02):
            raise RuntimeError(f"control plane {i} did not answer /v1/status/leader:\n" + m["proc"].output()[-3000:])

    def api_of(self, i, timeout=None):
        a = Api(self.members[i]["http"], self.ca_file, self.token)
        if timeout:
            a.timeout = timeout
        return a

    def leader_of(self, i):
        """The leader's index as member i names it (None: no answer, or no leader yet)."""
        try:
            st, _, body = self.api_of(i).request("GET", "/v1/status/leader")
        except (OSError, RuntimeError):
            return None
        if st != 200:
            return None
        url = json.loads(body)
        for k, m in enumerate(self.members):
            if url.endswith(f":{m['http']}"):
                return k
        return None

    def leader(self, timeout=30):
        """The member that leads, once a running member names it and it answers ready."""
        got = []

        def found():
            for i, m in enumerate(self.members):
                if m["proc"] and m["proc"].running():
                    k = self.leader_of(i)
                    if k is not None and self.members[k]["proc"] and self.members[k]["proc"].running():
                        st, _, _ = self.api_of(k).request("GET", "/v1/status/ready")
                        if st == 200:
                            got.append(k)
                            return True
            return False

        return got[-1] if wait_until(found, timeout, 0.02) else None

    def start_all(self):
        for i in range(len(self.members)):
            self.start_member(i, wait=False)
        lead = self.leader(60)
        if lead is None:
            raise RuntimeError("no control plane became the leader:\n" + self.members[0]["proc"].output()[-3000:])
        self.cp = self.members[lead]["proc"]
        self.http_port, self.grpc_port = self.members[lead]["http"], self.members[lead]["grpc"]
        self.api = self.api_of(lead)
        if self.secure and not self.token:
            self.token = self.api.json("POST", "/v1/acl/bootstrap")["SecretID"]
            self.api.token = self.token
        return lead

    def kill_member(self, i):
        self.members[i]["proc"].kill()

    def close(self):
        if self.closed:
            return
        for m in self.members:
            if m["proc"] and m["proc"] is not self.cp and m["proc"].running():
                m["proc"].stop(20)
        super().close()
