"""The chaos workload: volumes created and deleted, allocations with single-writer and
multi-reader volumes submitted and stopped, snapshots taken and deleted, and reads of volumes and
allocations (the linearizability check's observations), from a few client threads, each request
to a control plane picked at random (standbys forward). Its choices come from its own seeded
random generator, so a seed replays the same sequence of intentions (the answers differ with
the timing). Every request is recorded by api.Client."""
import random
import threading
import time

TASK_MODES = ("write", "read")
# Volume access modes: who may claim them and how.
SW, MR, MW1 = "single-node-writer", "multi-node-reader-only", "multi-node-single-writer"


class Model:
    """What the workload believes exists, to choose sensible requests (not the truth: the
    checker works from the recorded history alone)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.volumes = {}    # id -> access mode (created, or created in doubt)
        self.allocs = {}     # name -> {"id", "volume", "write"} (submitted and not stopped)
        self.stopped = {}    # name -> id
        self.snapshots = {}  # snapshot id -> volume id
        self.serial = 0

    def next(self, prefix):
        with self.lock:
            self.serial += 1
            return f"{prefix}{self.serial:05d}"


def volume_body(vid, mode):
    return {"Volumes": [{"ID": vid, "Name": vid, "PluginID": "hostpath", "RequestedCapacityMin": 1 << 20,
                         "RequestedCapabilities": [{"AccessMode": mode, "AttachmentMode": "file-system"}],
                         "Secrets": {"token": f"chaos-{vid}"}}]}


def alloc_body(name, vid, mode, write, node, task_argv, disconnect):
    a = {"Name": name,
         "Volumes": {"data": {"Type": "csi", "Source": vid, "ReadOnly": not write, "AccessMode": mode,
                              "AttachmentMode": "file-system"}},
         "Task": {"Command": task_argv[0], "Args": task_argv[1:], "KillTimeout": "5s"}}
    if node:
        a["NodeID"] = node
    if disconnect:
        a["StopAfterClientDisconnect"] = disconnect
    return {"Allocation": a}


def present(status, _body):
    return "present" if status == 200 else "absent"


def desired(status, body):
    return body["DesiredStatus"] if status == 200 else "absent"


def read_volume(client, vid, cp, kind="volume.read"):
    return client.op(kind, vid, cp, "GET", f"/v1/volume/csi/{vid}", read=True, value_of=present,
                     fields=lambda b: {"ext": b.get("ExternalID"), "claims": len(b.get("Claims") or [])})


def read_alloc(client, name, alloc_id, cp, kind="alloc.read"):
    def seen(b):
        events = b.get("Events") or []
        return {"client_status": b.get("ClientStatus"), "node": b.get("NodeID"),
                "started": any(e.get("Type") == "Started" for e in events),
                "last_event": events[-1].get("Message", "") if events else ""}
    return client.op(kind, name, cp, "GET", f"/v1/allocation/{alloc_id}", read=True, value_of=desired,
                     fields=seen, extra={"alloc_id": alloc_id})


class Workload:
    def __init__(self, client, seed, task_py, record_dir, nodes, cps, threads=3, max_allocs=12, max_volumes=16,
                 task_fails_after=None):
        self.client = client
        self.seed = seed
        self.local = threading.local()  # each client thread draws from its own seeded generator
        self.task = ["/usr/bin/python3", task_py, record_dir]
        self.fail_args = [] if task_fails_after is None else [str(task_fails_after)]
        self.nodes = nodes
        self.cps = cps
        self.model = Model()
        self.threads = threads
        self.max_allocs = max_allocs
        self.max_volumes = max_volumes
        self.stop_flag = threading.Event()
        self.workers = []

    # ---- choices: thread i draws from random.Random("workload-SEED-i") ----
    @property
    def rng(self):
        r = getattr(self.local, "rng", None)
        if r is None:
            r = self.local.rng = random.Random(f"workload-{self.seed}-{threading.current_thread().name}")
        return r

    def pick(self, seq):
        seq = list(seq)
        return self.rng.choice(seq) if seq else None

    def chance(self, p):
        return self.rng.random() < p

    def uniform(self, a, b):
        return self.rng.uniform(a, b)

    def cp(self):
        return self.pick(self.cps)

    # ---- operations ----
    def create_volume(self):
        vid = self.model.next("vol")
        mode = self.pick((SW, SW, MR, MW1))
        rec, _ = self.client.op("volume.create", vid, self.cp(), "PUT", f"/v1/volume/csi/{vid}/create",
                                volume_body(vid, mode), extra={"mode": mode},
                                fields=lambda b: {"ext": b["Volumes"][0]["ExternalID"]})
        if rec["outcome"] != "fail":
            with self.model.lock:
                self.model.volumes[vid] = mode

    def delete_volume(self):
        with self.model.lock:
            busy = {a["volume"] for a in self.model.allocs.values()}
            free = [v for v in self.model.volumes if v not in busy]
        vid = self.pick(free)
        if not vid:
            return
        rec, _ = self.client.op("volume.delete", vid, self.cp(), "DELETE", f"/v1/volume/csi/{vid}/delete")
        if rec["outcome"] == "ok":
            with self.model.lock:
                self.model.volumes.pop(vid, None)

    def read_volume(self):
        vid = self.pick(list(self.model.volumes))
        if vid:
            read_volume(self.client, vid, self.cp())

    def submit(self):
        with self.model.lock:
            vols = dict(self.model.volumes)
        vid = self.pick(vols)
        if not vid:
            return
        mode = vols[vid]
        write = mode != MR and self.chance(0.6)
        name = self.model.next("alloc")
        node = self.pick(self.nodes) if self.chance(0.5) else None
        lifetime = 0 if self.chance(0.6) else round(self.uniform(3, 40), 1)
        disconnect = "15s" if self.chance(0.4) else None
        body = alloc_body(name, vid, mode, write, node, self.task + ["write" if write else "read", str(lifetime)] + self.fail_args,
                          disconnect)
        rec, text = self.client.op("alloc.submit", name, self.cp(), "POST", "/v1/allocations", body,
                                   value_of=lambda s, b: b["ID"],
                                   extra={"volume": vid, "write": write, "node": node, "mode": mode})
        if rec["outcome"] == "ok":
            with self.model.lock:
                self.model.allocs[name] = {"id": rec["value"], "volume": vid, "write": write}

    def stop(self):
        name = self.pick(list(self.model.allocs))
        if not name:
            return
        with self.model.lock:
            a = self.model.allocs.get(name)
        if not a:
            return
        rec, _ = self.client.op("alloc.stop", name, self.cp(), "POST", f"/v1/allocation/{a['id']}/stop",
                                extra={"alloc_id": a["id"]})
        if rec["outcome"] != "fail" or rec["status"] == 404:
            with self.model.lock:
                self.model.allocs.pop(name, None)
                self.model.stopped[name] = a["id"]

    def read_alloc(self):
        with self.model.lock:
            known = {**{n: a["id"] for n, a in self.model.allocs.items()}, **self.model.stopped}
        name = self.pick(list(known))
        if name:
            read_alloc(self.client, name, known[name], self.cp())

    def snapshot(self):
        if self.model.snapshots and self.chance(0.5):
            sid = self.pick(list(self.model.snapshots))
            rec, _ = self.client.op("snapshot.delete", sid, self.cp(), "DELETE",
                                    f"/v1/volumes/snapshot?plugin_id=hostpath&snapshot_id={sid}")
            if rec["outcome"] == "ok":
                with self.model.lock:
                    self.model.snapshots.pop(sid, None)
            return
        vid = self.pick(list(self.model.volumes))
        if not vid:
            return
        name = self.model.next("snap")
        body = {"Snapshots": [{"SourceVolumeID": vid, "PluginID": "hostpath", "Name": name}]}
        rec, _ = self.client.op("snapshot.create", name, self.cp(), "PUT", "/v1/volumes/snapshot", body,
                                value_of=lambda s, b: b["Snapshots"][0]["ID"], extra={"volume": vid})
        if rec["outcome"] == "ok":
            with self.model.lock:
                self.model.snapshots[rec["value"]] = vid

    def step(self):
        with self.model.lock:
            n_allocs, n_vols = len(self.model.allocs), len(self.model.volumes)
        table = [(self.create_volume, 3 if n_vols < self.max_volumes else 0),
                 (self.delete_volume, 1 if n_vols > 4 else 0),
                 (self.submit, 5 if n_allocs < self.max_allocs else 0),
                 (self.stop, 4 if n_allocs > 2 else 1),
                 (self.read_volume, 4), (self.read_alloc, 3), (self.snapshot, 1)]
        op = self.rng.choices([t[0] for t in table], weights=[t[1] for t in table])[0]
        op()

    def run_thread(self):
        while not self.stop_flag.is_set():
            try:
                self.step()
            except Exception as e:  # a harness bug must not end the workload silently
                print(f"chaos: workload error: {type(e).__name__}: {e}", flush=True)
            self.stop_flag.wait(self.uniform(0.05, 0.4))

    def start(self):
        for i in range(self.threads):
            t = threading.Thread(target=self.run_thread, name=f"workload-{i}", daemon=True)
            t.start()
            self.workers.append(t)

    def stop_all_threads(self):
        self.stop_flag.set()
        for t in self.workers:
            t.join(timeout=60)
        self.workers.clear()
        self.stop_flag.clear()

    def known_allocations(self):
        with self.model.lock:
            return {**self.model.stopped, **{n: a["id"] for n, a in self.model.allocs.items()}}
