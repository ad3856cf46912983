"""The history the harness gathers besides the client operations: the control planes' event
stream (every event, with the control plane's own CLOCK_MONOTONIC stamp "MonotonicNs" and the
time the harness received it), followed across failovers by resuming at the last index + 1 on
whichever member leads; and the end state once the faults are healed and the workload is done."""
import http.client
import json
import os
import ssl
import threading
import time


class EventReader:
    def __init__(self, api, urls, leader_of, path):
        self.api = api
        self.urls = urls
        self.leader_of = leader_of  # () -> member name or None
        self.out = open(path, "a", buffering=1)
        self.next_index = 1
        self.stop_flag = threading.Event()
        self.thread = None
        self.reconnects = 0
        self.last_line = time.monotonic()

    def run(self):
        while not self.stop_flag.is_set():
            cp = self.leader_of()
            if not cp:
                self.stop_flag.wait(0.5)
                continue
            try:
                self.follow(cp)
            except (OSError, ssl.SSLError, http.client.HTTPException, ValueError):
                pass
            self.reconnects += 1
            self.stop_flag.wait(0.2)

    def follow(self, cp):
        host, port = self.urls[cp].split("://", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPSConnection(host, int(port), context=self.api.ctx, timeout=35)
        try:
            conn.request("GET", f"/v1/event/stream?topic=*&index={self.next_index}",
                         headers={"X-Mooring-Token": self.api.token})
            r = conn.getresponse()
            if r.status != 200:
                r.read()
                return
            while not self.stop_flag.is_set():
                line = r.readline()
                if not line:
                    return
                got = time.monotonic_ns()
                self.last_line = time.monotonic()
                doc = json.loads(line)
                if not doc:
                    continue  # heartbeat
                for e in doc.get("Events", []):
                    e["ReceivedNs"] = got
                    e["From"] = cp
                    self.out.write(json.dumps(e, sort_keys=True) + "\n")
                self.next_index = max(self.next_index, doc["Index"] + 1)
        finally:
            conn.close()

    def start(self):
        self.thread = threading.Thread(target=self.run, name="events", daemon=True)
        self.thread.start()

    def stop(self):
        self.stop_flag.set()
        if self.thread:
            self.thread.join(timeout=40)
        self.out.close()


def mounts_under(path):
    prefix = path.rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(prefix)]


def end_state(client, cp, cluster, run_dir, vols):
    """What is left once the workload stopped and the releases had their time: claims,
    controller publications (the plugin's own view, through the API's external list), mounts,
    tasks and plugin processes. Written to final.json for the checker's property 5."""
    from cluster import processes_mentioning
    state = {"t": time.monotonic_ns()}
    state["volumes_read"] = vols is not None
    claims = []
    for v in vols or []:
        r, t = client.op("final.volume", v["ID"], cp, "GET", f"/v1/volume/csi/{v['ID']}", read=True)
        if r["outcome"] == "ok" and r["status"] == 200:
            for c in json.loads(t).get("Claims") or []:
                claims.append({"volume": v["ID"], **c})
    state["claims"] = claims
    published, token, read_all = [], "", True
    for _ in range(1000):
        rec, text = client.op("final.external", "*", cp, "GET",
                              f"/v1/volumes/external?plugin_id=hostpath&per_page=200&next_token={token}", read=True)
        if rec["outcome"] != "ok":
            read_all = False
            break
        doc = json.loads(text)
        for v in doc.get("Volumes") or []:
            if v.get("PublishedExternalNodeIDs"):
                published.append({"external_id": v.get("ExternalID"), "nodes": v["PublishedExternalNodeIDs"]})
        token = doc.get("NextToken") or ""
        if not token:
            break
    state["external_read"] = read_all
    state["publications"] = published
    state["mounts"] = mounts_under(run_dir)
    tasks = [{"pid": pid, "argv": argv} for pid, argv in processes_mentioning(os.path.join(run_dir, "tasks"))]
    state["tasks"] = tasks
    state["plugins"] = {node: cluster.plugin_pids(node) for node in ("node0", "node1", "node2")}
    return state
