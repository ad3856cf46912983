"""The stack `make run` starts, driven by a test: the services' command lines come from
scripts/lib/local-stack.sh, the very ones scripts/run-local.sh runs (same binaries' flags, agent
config, certificates, environment), so the test cannot drift from what users run. Each service in
a session of its own with its output appended to $MOORING_DATA/logs/<name>.log, as run-local has
it; here they can be killed and started again one by one."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from processes import Api, eventually, running_processes, start_group  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIB = os.path.join(ROOT, "scripts", "lib", "local-stack.sh")
NAMES = {"controlplane": "CP_CMD", "agent": "AGENT_CMD"}


class LocalStack:
    def __init__(self, build, data, env=None):
        self.data = data
        self.env = dict(env or os.environ, MOORING_BIN=build, MOORING_DATA=data)
        self.procs = {}
        self.commands = {name: self._lib(f'printf "%s\\0" "${{{var}[@]}}"').split("\0")[:-1]
                         for name, var in NAMES.items()}
        self.api_url = self._lib('printf %s "$API"')
        self.api = None

    def _lib(self, then):
        """Runs local_stack_prepare (idempotent), then `then`, in bash; its stdout."""
        r = subprocess.run(["bash", "-c", f'set -euo pipefail; . "{LIB}"; local_stack_prepare >&2; {then}'],
                           env=self.env, cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"scripts/lib/local-stack.sh: {then}: exit {r.returncode}: {r.stderr}")
        return r.stdout

    def log_path(self, name):
        return os.path.join(self.data, "logs", f"{name}.log")

    def log(self, name, since=0):
        with open(self.log_path(name), errors="replace") as f:
            f.seek(since)
            return f.read()

    def log_size(self, name):
        return os.path.getsize(self.log_path(name)) if os.path.exists(self.log_path(name)) else 0

    def start(self, name):
        with open(self.log_path(name), "a") as out:
            self.procs[name] = start_group(self.commands[name], cwd=ROOT, env=self.env, stdout=out,
                                           stderr=subprocess.STDOUT)
        return self.procs[name]

    def running(self, name):
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def kill9(self, name):
        p = self.procs[name]
        os.kill(p.pid, signal.SIGKILL)
        p.wait()

    def stop(self, name, timeout):
        """SIGTERM and wait: "" when it stopped with exit 0 (or never ran), else what went wrong."""
        p = self.procs.get(name)
        if p is None:
            return ""
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                return f"did not stop within {timeout} s of SIGTERM"
        if p.returncode < 0:
            return f"was killed by signal {-p.returncode} ({signal.Signals(-p.returncode).name})"
        return "" if p.returncode == 0 else f"exited with code {p.returncode}"

    def bootstrap(self):
        """ACLs bootstrapped as run-local does (the token kept in $MOORING_DATA/bootstrap-token)."""
        self._lib("local_stack_bootstrap")
        with open(os.path.join(self.data, "bootstrap-token")) as f:
            self.api = Api(os.path.join(self.data, "tls", "ca.pem"), f.read().strip())

    def healthy(self):
        """GET /v1/status/health answers 200 (no token needed)."""
        api = self.api or Api(os.path.join(self.data, "tls", "ca.pem"), "")
        return api.call("GET", self.api_url + "/v1/status/health")[0] == 200

    def call(self, method, path, body=None):
        status, _, text = self.api.call(method, self.api_url + path, body)
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text

    def plugin_healthy(self):
        status, plugin = self.call("GET", "/v1/plugin/csi/hostpath")
        return status == 200 and plugin.get("NodesHealthy", 0) >= 1 and plugin.get("ControllersHealthy", 0) >= 1

    def plugin_pids(self):
        """The hostpath plugin processes serving this stack's data dir (orphans of killed agents too)."""
        hostpath_data = os.path.join(self.data, "hostpath").encode()
        return [pid for pid, args in running_processes()
                if args and args[0].endswith(b"mooring-hostpath") and hostpath_data in args]

    # ---- a lifecycle: create, submit, running, stop, claim freed ----

    def create_volume(self, vid):
        body = {"Volumes": [{"ID": vid, "Name": vid, "PluginID": "hostpath", "RequestedCapacityMin": 1 << 20,
                             "RequestedCapabilities": [{"AccessMode": "single-node-writer",
                                                        "AttachmentMode": "file-system"}]}]}
        status, answer = self.call("PUT", f"/v1/volume/csi/{vid}/create", body)
        if status != 200:
            raise RuntimeError(f"create volume {vid}: {status} {answer}")

    def submit(self, name, vid, script):
        body = {"Allocation": {"Name": name,
                               "Volumes": {"data": {"Type": "csi", "Source": vid, "AccessMode": "single-node-writer",
                                                    "AttachmentMode": "file-system"}},
                               "Task": {"Command": "/bin/sh", "Args": ["-c", script], "KillTimeout": "5s"}}}
        status, answer = self.call("POST", "/v1/allocations", body)
        if status != 200:
            raise RuntimeError(f"submit {name}: {status} {answer}")
        return answer["ID"]

    def alloc_status(self, aid):
        status, alloc = self.call("GET", f"/v1/allocation/{aid}")
        return alloc.get("ClientStatus") if status == 200 else None

    def claims(self, vid):
        status, volume = self.call("GET", f"/v1/volume/csi/{vid}")
        return len(volume.get("Claims") or []) if status == 200 else None

    def wait(self, what, check, seconds=60):
        started = time.time()
        if not eventually(check, seconds, every=0.1):
            raise RuntimeError(f"{what}: not within {seconds} s")
        return time.time() - started

    def lifecycle(self, vid):
        """submit → running → stop → claim freed, on a new volume; the seconds each step took."""
        self.create_volume(vid)
        aid = self.submit(f"user-{vid}", vid, 'echo hi > "$MOORING_VOLUME_DATA/hi"; exec sleep 600')
        running = self.wait(f"{vid}: allocation running", lambda: self.alloc_status(aid) == "running")
        status, answer = self.call("POST", f"/v1/allocation/{aid}/stop")
        if status != 200:
            raise RuntimeError(f"stop {aid}: {status} {answer}")
        freed = self.wait(f"{vid}: claim freed", lambda: self.claims(vid) == 0)
        self.wait(f"{vid}: allocation complete", lambda: self.alloc_status(aid) == "complete")
        return running, freed
