#!/usr/bin/python3
"""The real binaries answer as docs/api/openapi.yaml says. Starts mooring-controlplane (ACLs on,
plain HTTP on a free port), a mooring-nodeagent with mooring-hostpath (the dashboard test's stack),
checks that GET /v1/openapi.json is the YAML, then walks every documented operation: ACL policies
and tokens, a volume's lifecycle (create, register, expand, snapshot, group snapshot, detach,
delete, modify), namespaces (apply, read, a quota's refusal, delete), allocations (a plain one, a system one, stop), claims (list, read, a refused release), nodes (eligibility, drain and its cancel), plugins, events and the event
stream, metrics, the keyring, the dashboard's files, and refusals (400, 401, 403, 404, 409, 422).
Each answer's status must be documented for its route and its body must validate against that
status's schema (python3-jsonschema), each body the API accepted against the route's request schema;
at the end every documented operation must have been called.

    openapi_answers_test.py <build dir>      exit 77 (skipped) when not root
"""
import http.client
import json
import os
import shutil
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "dashboard"))
import contract  # noqa: E402
from dashboard_test import Stack, eventually  # noqa: E402  (the same stack, started the same way)

SKIP = 77


class Walker:
    """Calls the API and checks each answer against the contract; remembers what was called."""

    def __init__(self, port, token, c):
        self.port, self.token, self.c = port, token, c
        self.problems, self.called, self.calls = [], set(), 0

    def raw(self, method, target, body=None, token=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            h = dict(headers or {})
            tok = self.token if token is None else token
            if tok:
                h["X-Mooring-Token"] = tok
            data = None
            if body is not None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                h["Content-Type"] = "application/json"
            conn.request(method, target, body=data, headers=h)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def call(self, method, target, body=None, token=None, headers=None, expect=None):
        status, hdrs, payload = self.raw(method, target, body, token, headers)
        self.record(method, target, status, hdrs.get("content-type", ""), payload)
        if body is not None and 200 <= status < 300:
            self.problems += self.c.check_request(method, target, body)
        if expect is not None and status not in (expect if isinstance(expect, tuple) else (expect,)):
            self.problems.append(f"{method} {target}: expected {expect}, got {status}: {payload[:300]!r}")
        try:
            return status, json.loads(payload) if payload else None, hdrs
        except ValueError:
            return status, payload, hdrs

    def record(self, method, target, status, content_type, payload):
        self.calls += 1
        problems, op = self.c.check(method, target, status, content_type, payload)
        self.problems += problems
        if op:
            self.called.add(op)


def acl_walk(w):
    mgmt = w.token
    w.call("POST", "/v1/acl/bootstrap", token="", expect=400)  # done once by the stack already
    w.call("PUT", "/v1/acl/bootstrap", token="", expect=400)
    rules = {"Namespace": {"default": {"Policy": "read"}}, "Plugin": "read", "Node": "read"}
    w.call("PUT", "/v1/acl/policy/readers", {"Description": "read only", "Rules": rules}, expect=200)
    w.call("POST", "/v1/acl/policy/scratch", {"Rules": {"Operator": "read"}}, expect=200)
    w.call("PUT", "/v1/acl/policy/bad", {"Rules": {"Planet": "read"}}, expect=400)
    w.call("GET", "/v1/acl/policies", expect=200)
    w.call("GET", "/v1/acl/policy/readers", expect=200)
    w.call("GET", "/v1/acl/policy/nope", expect=404)
    _, reader, _ = w.call("PUT", "/v1/acl/token", {"Name": "reader", "Policies": ["readers"]}, expect=200)
    _, temp, _ = w.call("POST", "/v1/acl/token", {"Name": "temp", "Type": "client", "Policies": ["scratch"],
                                                  "ExpirationTTL": "1h"}, expect=200)
    w.call("POST", "/v1/acl/token", {"Name": "x", "Policies": ["nope"]}, expect=400)
    w.call("GET", "/v1/acl/tokens", expect=200)
    w.call("GET", "/v1/acl/tokens", token=reader["SecretID"], expect=403)
    w.call("GET", "/v1/acl/token/self", expect=200)
    w.call("GET", "/v1/acl/token/self", token=reader["SecretID"], expect=200)
    w.call("GET", "/v1/acl/token/self", token="", expect=401)
    w.call("GET", f"/v1/acl/token/{reader['AccessorID']}", expect=200)
    w.call("GET", "/v1/acl/token/nope", expect=404)
    w.call("DELETE", f"/v1/acl/token/{temp['AccessorID']}", expect=200)
    w.call("DELETE", f"/v1/acl/token/{temp['AccessorID']}", expect=404)
    w.call("DELETE", "/v1/acl/policy/scratch", expect=200)
    w.call("DELETE", "/v1/acl/policy/scratch", expect=404)
    w.token = mgmt
    return reader["SecretID"]


def namespace_walk(w, reader):
    w.call("GET", "/v1/namespaces", expect=200)
    w.call("GET", "/v1/namespaces", token="", expect=401)
    w.call("PUT", "/v1/namespace/team-q", {"Description": "quota'd", "Quota": {"MaxVolumes": 0}}, expect=200)
    w.call("POST", "/v1/namespace/team-r", {"Quota": {"MaxRunningAllocations": None}}, expect=200)
    w.call("PUT", "/v1/namespace/team-q", {"Quota": {"MaxDisks": 1}}, expect=400)
    w.call("PUT", "/v1/namespace/team-q", {}, token=reader, expect=403)
    w.call("GET", "/v1/namespace/team-q", expect=200)
    w.call("GET", "/v1/namespace/team-q", token=reader, expect=403)
    w.call("GET", "/v1/namespace/nope", expect=404)
    w.call("PUT", "/v1/volume/csi/q1?namespace=team-q", volume_spec("q1", ExternalID="q1"), expect=409)  # MaxVolumes 0
    w.call("PUT", "/v1/volume/csi/q1?namespace=team-zz", volume_spec("q1", ExternalID="q1"), expect=400)
    w.call("DELETE", "/v1/namespace/default", expect=409)
    w.call("DELETE", "/v1/namespace/team-r", expect=200)
    w.call("DELETE", "/v1/namespace/team-r", expect=404)


def volume_spec(vid, **extra):
    return {"Volumes": [dict({"ID": vid, "Name": vid, "PluginID": "hostpath",
                              "RequestedCapabilities": [{"AccessMode": "single-node-writer",
                                                         "AttachmentMode": "file-system"}],
                              "RequestedCapacityMin": 1 << 20}, **extra)]}


def volume_walk(w, reader):
    w.call("GET", "/v1/volumes", token="", expect=401)
    w.call("PUT", "/v1/volume/csi/ro/create", volume_spec("ro"), token=reader, expect=403)
    _, made, _ = w.call("PUT", "/v1/volume/csi/vol-a/create", volume_spec("vol-a"), expect=200)
    w.call("POST", "/v1/volume/csi/vol-b/create", volume_spec("vol-b"), expect=200)
    w.call("PUT", "/v1/volume/csi/vol-c/create", volume_spec("vol-c", Colour="blue"), expect=400)
    w.call("PUT", "/v1/volume/csi/vol-c/create", volume_spec("vol-d"), expect=400)  # id differs from the path
    external = made["Volumes"][0]["ExternalID"]
    # Re-registering the same backend volume: a larger RequestedCapacityMin expands it.
    w.call("PUT", "/v1/volume/csi/vol-a", volume_spec("vol-a", ExternalID=external, RequestedCapacityMin=2 << 20),
           expect=200)
    w.call("POST", "/v1/volume/csi/vol-a", volume_spec("vol-a", ExternalID=external), expect=200)
    w.call("PUT", "/v1/volumes", volume_spec("vol-e", ExternalID=external), expect=409)  # vol-a has it
    w.call("POST", "/v1/volumes", {"Volumes": []}, expect=400)
    w.call("PUT", "/v1/volume/csi/vol-f", volume_spec("vol-f", ExternalID="no-such-backend-volume"), expect=400)
    w.call("GET", "/v1/volumes", expect=200)
    w.call("GET", "/v1/volumes?namespace=*&per_page=1", expect=200)
    w.call("GET", "/v1/volumes?per_page=0", expect=400)
    w.call("GET", "/v1/volume/csi/vol-a", expect=200)
    w.call("GET", "/v1/volume/csi/vol-a", token=reader, expect=200)
    w.call("GET", "/v1/volume/csi/nope", expect=404)
    w.call("GET", "/v1/volume/csi/" + "x" * 200, expect=400)
    w.call("GET", "/v1/volumes/external?plugin_id=hostpath", expect=200)
    w.call("GET", "/v1/volumes/external", expect=400)


def snapshot_walk(w):
    _, snap, _ = w.call("PUT", "/v1/volumes/snapshot", {"Snapshots": [
        {"SourceVolumeID": "vol-a", "PluginID": "hostpath", "Name": "nightly"}]}, expect=200)
    w.call("POST", "/v1/volumes/snapshot", {"Snapshots": [
        {"SourceVolumeID": "nope", "PluginID": "hostpath", "Name": "n"}]}, expect=404)
    w.call("GET", "/v1/volumes/snapshot?plugin_id=hostpath", expect=200)
    sid = snap["Snapshots"][0]["ID"]
    w.call("DELETE", f"/v1/volumes/snapshot?plugin_id=hostpath&snapshot_id={sid}", expect=200)
    w.call("DELETE", "/v1/volumes/snapshot?plugin_id=hostpath", expect=400)
    group = {"GroupSnapshot": {"Name": "both", "SourceVolumeIDs": ["vol-a", "vol-b"]}}
    _, g, _ = w.call("PUT", "/v1/volumes/group-snapshot", group, expect=200)
    w.call("POST", "/v1/volumes/group-snapshot", group, expect=200)  # the same name and volumes: the same group
    w.call("POST", "/v1/volumes/group-snapshot", {"GroupSnapshot": {"Name": "both", "SourceVolumeIDs": ["vol-a"]}},
           expect=409)
    w.call("GET", "/v1/volumes/group-snapshot?plugin_id=hostpath", expect=200)
    gid = g["GroupSnapshot"]["ID"]
    w.call("GET", f"/v1/volumes/group-snapshot/{gid}?plugin_id=hostpath", expect=200)
    w.call("GET", "/v1/volumes/group-snapshot/nope?plugin_id=hostpath", expect=404)
    w.call("DELETE", f"/v1/volumes/group-snapshot?plugin_id=hostpath&group_snapshot_id={gid}", expect=200)


def allocation_walk(w, reader):
    spec = {"Allocation": {"Name": "writer", "Volumes": {"data": {
        "Type": "csi", "Source": "vol-a", "AccessMode": "single-node-writer", "AttachmentMode": "file-system"}},
        "Task": {"Command": "/bin/sleep", "Args": ["600"], "Env": {"A": "1"}, "SecretEnv": {"S": "hidden"},
                 "KillTimeout": "2s"}}}
    _, placed, _ = w.call("POST", "/v1/allocations", spec, expect=200)
    aid = placed["ID"]
    eventually("the allocation running", lambda: w.raw("GET", f"/v1/allocation/{aid}")[2].find(b'"running"') > 0,
               timeout=60)
    w.call("PUT", "/v1/allocations", spec, expect=409)  # vol-a's one writer is taken
    w.call("POST", "/v1/allocations", {"Allocation": {"Name": "x", "Volumes": {"d": {"Type": "nfs"}}}}, expect=400)
    w.call("GET", "/v1/allocations", expect=200)
    w.call("GET", "/v1/allocations?namespace=*&node_id=web-node", expect=200)
    _, a, hdrs = w.call("GET", f"/v1/allocation/{aid}", expect=200)
    w.call("GET", f"/v1/allocation/{aid}?index={hdrs.get('x-mooring-index', '1')}&wait=100ms", expect=200)
    w.call("GET", "/v1/allocation/nope", expect=404)
    w.call("GET", "/v1/volume/csi/vol-a?stats=refresh", expect=200)
    # Claims as objects: the writer's claim on vol-a, listed, read, and not released while it runs.
    w.call("GET", "/v1/volumes/claims?namespace=*&node=web-node", expect=200)
    w.call("GET", "/v1/volumes/claims?state=gone", expect=400)
    w.call("GET", f"/v1/volumes/claim/vol-a:{aid}", expect=200)
    w.call("GET", "/v1/volumes/claim/no-colon", expect=400)
    w.call("DELETE", f"/v1/volumes/claim/vol-a:{aid}", expect=409)  # its allocation runs on a live node
    # Modify: vol-a declares no MutableParameters (400); a read token may not (403).
    w.call("PUT", "/v1/volume/csi/vol-a/modify", {"MutableParameters": {"tier": "fast"}}, expect=400)
    w.call("POST", "/v1/volume/csi/vol-a/modify", {"MutableParameters": {"tier": "fast"}}, token=reader, expect=403)
    w.call("DELETE", "/v1/volume/csi/vol-a", expect=409)  # in use
    w.call("PUT", f"/v1/allocation/{aid}", {"Task": {"Command": "/bin/true"}}, expect=(400, 409))  # not a plugin's
    _, sysalloc, _ = w.call("POST", "/v1/allocations", {"Allocation": {
        "Name": "everywhere", "System": True, "Task": {"Command": "/bin/sleep", "Args": ["600"]}}}, expect=200)
    w.call("GET", f"/v1/allocation/{sysalloc['ID']}", expect=200)
    w.call("POST", f"/v1/allocation/{sysalloc['ID']}/stop", expect=200)
    w.call("POST", f"/v1/allocation/{aid}/stop", expect=200)
    w.call("PUT", f"/v1/allocation/{aid}/stop", expect=200)  # already stopping: the same answer
    w.call("POST", "/v1/allocation/nope/stop", expect=404)
    return aid


def release_walk(w):
    w.call("DELETE", "/v1/volume/csi/vol-a/detach?node=web-node", expect=200)
    w.call("DELETE", "/v1/volume/csi/vol-a/detach", expect=400)
    eventually("vol-a's claims freed",
               lambda: json.loads(w.raw("GET", "/v1/volume/csi/vol-a")[2]).get("Claims") == [], timeout=60)
    w.call("DELETE", "/v1/volume/csi/vol-b/delete", expect=200)
    w.call("DELETE", "/v1/volume/csi/vol-b/delete", expect=404)
    w.call("DELETE", "/v1/volume/csi/vol-a?force=true", expect=200)
    w.call("DELETE", "/v1/volume/csi/vol-a", expect=404)


def cluster_walk(w):
    w.call("GET", "/v1/plugins", expect=200)
    w.call("GET", "/v1/plugin/csi/hostpath", expect=200)
    w.call("GET", "/v1/plugin/csi/nope", expect=404)
    w.call("GET", "/v1/nodes", expect=200)
    w.call("GET", "/v1/node/web-node", expect=200)
    w.call("GET", "/v1/node/nope", expect=404)
    w.call("GET", "/v1/node/web-node/identity", expect=(200, 404))
    w.call("POST", "/v1/node/web-node/intro", {"TTL": "1h"}, expect=200)
    w.call("PUT", "/v1/node/new-node/intro", {"TTL": "9999h"}, expect=400)
    w.call("POST", "/v1/node/web-node/enroll", {"CSR": "not a CSR"}, token="", expect=(400, 501))
    w.call("PUT", "/v1/node/web-node/enroll", {}, token="", expect=(400, 501))
    w.call("DELETE", "/v1/node/web-node", expect=409)  # live
    # Eligibility and drain, undone again: nothing runs on the node by now.
    w.call("PUT", "/v1/node/web-node/eligibility", {"Eligible": False}, expect=200)
    w.call("POST", "/v1/node/web-node/eligibility", {"Eligible": True}, expect=200)
    w.call("PUT", "/v1/node/nope/eligibility", {"Eligible": False}, expect=404)
    w.call("PUT", "/v1/node/web-node/drain", {"Deadline": "1h"}, expect=200)
    w.call("POST", "/v1/node/web-node/drain", {"Disable": True, "MarkEligible": True}, expect=200)
    w.call("POST", "/v1/node/web-node/drain", {"Deadline": "soon"}, expect=400)
    w.call("DELETE", "/v1/node/nope", expect=404)
    w.call("GET", "/v1/events", expect=200)
    w.call("GET", "/v1/events?namespace=*&topic=Volume&per_page=5", expect=200)
    w.call("GET", "/v1/events", token="", expect=401)
    w.call("GET", "/v1/metrics?format=json", expect=200)
    w.call("GET", "/v1/metrics", expect=200)
    w.call("GET", "/v1/metrics?format=xml", expect=400)
    w.call("PUT", "/v1/operator/keyring/rotate", expect=(200, 501))  # 501: a control plane without a keyring
    w.call("POST", "/v1/operator/keyring/rotate?root=maybe", expect=(400, 501))
    w.call("GET", "/v1/status/health", token="", expect=200)
    w.call("GET", "/v1/status/ready", token="", expect=200)
    w.call("GET", "/", token="", expect=301)
    w.call("GET", "/ui", token="", expect=301)
    w.call("GET", "/ui/", token="", expect=200)
    w.call("GET", "/ui/app.js", token="", expect=200)
    w.call("GET", "/ui/style.css", token="", expect=200)
    w.call("GET", "/ui/nope.js", token="", expect=404)


def idempotency_walk(w):
    key = {"Idempotency-Key": "openapi-" + uuid.uuid4().hex}
    body = {"Rules": {"Node": "read"}}
    w.call("PUT", "/v1/acl/policy/replayed", body, headers=key, expect=200)
    _, _, hdrs = w.call("PUT", "/v1/acl/policy/replayed", body, headers=key, expect=200)
    if hdrs.get("idempotent-replayed") != "true":
        w.problems.append("a replayed write did not say Idempotent-Replayed: true")
    w.call("PUT", "/v1/acl/policy/replayed", {"Rules": {"Node": "write"}}, headers=key, expect=422)
    w.call("DELETE", "/v1/acl/policy/replayed", expect=200)


def stream_walk(w):
    """The first line of the event stream from index 1, validated as one line of the stream."""
    conn = http.client.HTTPConnection("127.0.0.1", w.port, timeout=30)
    try:
        conn.request("GET", "/v1/event/stream?index=1&topic=Volume", headers={"X-Mooring-Token": w.token})
        r = conn.getresponse()
        line = r.readline() if r.status == 200 else r.read()
        w.record("GET", "/v1/event/stream", r.status, r.getheader("Content-Type", ""), line)
        if r.status != 200 or b'"Events"' not in line:
            w.problems.append(f"the event stream from index 1: {r.status} {line[:200]!r}")
    finally:
        conn.close()
    w.call("GET", "/v1/event/stream?topic=Nonsense", expect=400)


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root (the hostpath plugin bind-mounts volumes)")
        return SKIP
    c = contract.Contract(contract.load())
    stack = Stack()
    started = time.time()
    ok = False
    try:
        stack.start()
        w = Walker(stack.http, stack.api.token, c)
        status, served, _ = w.call("GET", "/v1/openapi.json", token="", expect=200)
        if served != c.doc:
            w.problems.append("GET /v1/openapi.json is not docs/api/openapi.yaml (rebuild the control plane?)")
        reader = acl_walk(w)
        volume_walk(w, reader)
        namespace_walk(w, reader)
        snapshot_walk(w)
        allocation_walk(w, reader)
        release_walk(w)
        cluster_walk(w)
        idempotency_walk(w)
        stream_walk(w)
        missed = sorted(c.operations() - w.called)
        for method, template in missed:
            w.problems.append(f"{method} {template}: documented but never called by this test")
        for p in w.problems:
            print("FAIL:", p)
        print(f"{w.calls} answers checked against docs/api/openapi.yaml, {len(w.called)} of "
              f"{len(c.operations())} operations called, {len(w.problems)} problems, {time.time() - started:.1f} s")
        ok = not w.problems
    finally:
        left = stack.stop()
        if not ok:
            print(stack.logs())
        if left:
            print("FAIL: mounts left:", left)
            ok = False
        ok = ok and not stack.failures
        for f in stack.failures:
            print("FAIL:", f)
        shutil.rmtree(stack.dir, ignore_errors=True)  # the logs were printed on failure
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
