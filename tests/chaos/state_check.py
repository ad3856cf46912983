"""The checker's API and end-state properties, and the run's figures.

  linearizable  (4) reads of each volume (present/absent) and each allocation (DesiredStatus) are
                linearizable with the acknowledged and in-doubt writes (linearizability.py);
                stale reads (X-Mooring-Stale, a leader cut off from etcd serving from memory) are
                counted, not checked
  durable       (4) the final reads on the healed cluster agree with every acknowledged write
  nothing-left  (5) after the drain: no claim, no controller publication, no mount, no task, one
                plugin process per node; after the teardown no process, mount or namespace
  liveness      (6) after the heal, every stop frees its claims within 10 s and every submit runs
                or is refused with a reason"""
import linearizability
from claims_check import RELEASING, event_evidence, fmt_t, violation

STOP_TO_FREED_S = 10
SUBMIT_TO_START_S = 20  # a submit after the heal not started by then, nor refused, is a violation


def op_evidence(h, o):
    e = {"op": o["id"], "kind": o["kind"], "obj": o["obj"], "cp": o["cp"], "invoke": fmt_t(h, o["invoke"]),
         "complete": fmt_t(h, o["complete"]), "outcome": o["outcome"], "status": o["status"]}
    for k in ("value", "error", "stale", "alloc_id"):
        if k in o:
            e[k] = o[k]
    return e


# ---- (4) ----
WRITES = {"volume.create": "present", "volume.delete": "absent", "alloc.submit": "run", "alloc.stop": "stop",
          "drain.stop": "stop"}
READS = ("volume.read", "alloc.read")


def object_histories(h):
    objs = {}
    for o in h["ops"]:
        kind = o["kind"]
        if kind not in WRITES and kind not in READS:
            continue
        if o["outcome"] == "fail" or (kind in READS and (o["outcome"] != "ok" or o.get("stale"))):
            continue
        if kind in ("alloc.stop", "drain.stop") and o["status"] == 404:
            continue
        typ = "volume" if kind.startswith("volume") else "alloc"
        entry = {"invoke": o["invoke"], "complete": o["complete"] if o["outcome"] == "ok" else None,
                 "definite": o["outcome"] == "ok", "op": o,
                 "f": "write" if kind in WRITES else "read", "value": WRITES.get(kind, o.get("value"))}
        objs.setdefault((typ, o["obj"]), []).append(entry)
    for (typ, obj), ops in objs.items():
        if typ == "alloc":
            # The control plane stops an allocation by itself when its node is lost: a write
            # that may happen at any moment after the submit.
            first = min(x["invoke"] for x in ops)
            ops.append({"invoke": first, "complete": None, "definite": False, "f": "write", "value": "stop",
                        "op": {"id": 0, "kind": "node-loss (may happen)", "obj": obj, "cp": "", "invoke": first,
                               "complete": None, "outcome": "info", "status": 0}})
    return objs


def alloc_step(state, op):
    """DesiredStatus: absent -> run -> stop; a second submit of one name is refused."""
    if op["f"] == "read":
        return state if op["value"] == state else None
    if op["value"] == "run":
        return "run" if state == "absent" else None
    if op["value"] == "stop":
        return "stop" if state in ("run", "stop") else None
    return None


def linearizable(h):
    out, stats = [], {"objects": 0, "gave_up": 0, "stale_reads": 0}
    stats["stale_reads"] = sum(1 for o in h["ops"] if o.get("stale"))
    final_after = h["run"].get("drain") or float("inf")
    for (typ, obj), ops in object_histories(h).items():
        stats["objects"] += 1
        h["checked"]["operations in linearizability histories"] = h["checked"].get(
            "operations in linearizability histories", 0) + len(ops)
        step = alloc_step if typ == "alloc" else None
        ok, result = linearizability.check(ops, "absent", step)
        if ok is None:
            stats["gave_up"] += 1
            continue
        if ok:
            continue
        before = [o for o in ops if o["invoke"] < final_after]
        prop = "linearizable"
        if len(before) < len(ops) and linearizability.check(before, "absent", step)[0]:
            prop = "durable"
        stuck = result["stuck"]
        out.append(violation(
            prop,
            f"{typ} {obj}: no order of its operations explains what was read"
            + (" on the healed cluster (an acknowledged write was lost)" if prop == "durable" else "")
            + f"; stuck at op {stuck[0]['op']['id'] if stuck else '?'}",
            {"linearized": [op_evidence(h, o["op"]) for o in result["linearized"][-6:]],
             "cannot_place": [op_evidence(h, o["op"]) for o in stuck]}))
    return out, stats


# ---- (5) ----
def nothing_left(h):
    f = h["final"]
    if f is None:
        return [violation("nothing-left", "no end state was recorded (the harness failed before the drain)", {})]
    out = []
    for c in f.get("claims", []):
        out.append(violation("nothing-left", f"claim of {c.get('AllocationID')} on volume {c['volume']} "
                             f"(node {c.get('NodeID')}) is left in state {c.get('State')}: {c.get('LastError', '')}", c))
    for p in f.get("publications", []):
        out.append(violation("nothing-left", f"volume {p['external_id']} is still controller-published to "
                             f"{', '.join(p['nodes'])}", p))
    for m in f.get("mounts", []):
        out.append(violation("nothing-left", f"{m} is still mounted after the drain", {"mount": m}))
    for t in f.get("tasks", []):
        out.append(violation("nothing-left", f"task process {t['pid']} still runs after the drain", t))
    for node, pids in f.get("plugins", {}).items():
        if len(pids) > 1:
            out.append(violation("nothing-left", f"{node} has {len(pids)} hostpath plugin processes "
                                 f"(orphans of killed agents?): {pids}", {"node": node, "pids": pids}))
    after = f.get("after_teardown", {})
    for argv in after.get("processes", []):
        out.append(violation("nothing-left", f"a process outlived the teardown: {' '.join(argv)[:200]}", {"argv": argv}))
    for m in after.get("mounts", []):
        out.append(violation("nothing-left", f"{m} is still mounted after the teardown", {"mount": m}))
    for ns in after.get("namespaces", []):
        out.append(violation("nothing-left", f"network namespace {ns} outlived the teardown", {"netns": ns}))
    if not f.get("volumes_read", True) or not f.get("external_read", True):
        out.append(violation("nothing-left", "the end state could not be read through the API", {}))
    return out


# ---- (6) ----
def claims_of(h):
    """alloc id -> {"taken": t, "released": t or None, "volume", "node"} from the event stream."""
    claims = {}
    for e in h["events"]:
        d = e.get("Details", {})
        alloc = d.get("alloc_id") or d.get("allocation_id")
        if e.get("Topic") != "Claim" or not alloc:
            continue
        c = claims.setdefault((alloc, e["Key"]), {"alloc": alloc, "volume": e["Key"], "node": d.get("node_id"),
                                                  "taken": None, "releasing": None, "released": None})
        if e["Type"] == "ClaimTaken" and c["taken"] is None:
            c["taken"] = e["MonotonicNs"]
        elif e["Type"] in RELEASING and c["releasing"] is None:
            c["releasing"] = e["MonotonicNs"]
        elif e["Type"] in ("ClaimReleased", "ClaimDropped"):
            c["released"] = e["MonotonicNs"]
            c["releasing"] = c["releasing"] or e["MonotonicNs"]
    return claims


def liveness(h):
    out = []
    healed = h["run"].get("healed") or h["t0"]
    claims = claims_of(h)
    by_alloc = {}
    for c in claims.values():
        by_alloc.setdefault(c["alloc"], []).append(c)
    for o in h["ops"]:
        if o["kind"] not in ("alloc.stop", "drain.stop") or o["outcome"] != "ok" or o["invoke"] < healed:
            continue
        for c in by_alloc.get(o["alloc_id"], []):
            if c["taken"] is None or (c["released"] is not None and c["released"] <= o["complete"]):
                continue
            late = c["released"] is None or c["released"] - o["complete"] > STOP_TO_FREED_S * 1e9
            if late:
                took = "never" if c["released"] is None else f"{(c['released'] - o['complete']) / 1e9:.1f}s"
                out.append(violation("liveness", f"stop of {o['alloc_id']} after the heal: its claim on {c['volume']} "
                                     f"was freed after {took} (bound {STOP_TO_FREED_S}s)",
                                     {"stop": op_evidence(h, o), "claim": {k: fmt_t(h, v) if k in (
                                         "taken", "releasing", "released") else v for k, v in c.items()}}))
    return out + submits_after_heal(h, healed)


def submits_after_heal(h, healed):
    """Each allocation submitted after the heal started its task, or ended failed or lost with an
    event saying why; one stopped before SUBMIT_TO_START_S passed proves nothing either way."""
    out, final_reads, stops = [], {}, {}
    for o in h["ops"]:
        if o["kind"] == "alloc.read" and o["outcome"] == "ok":
            final_reads[o.get("alloc_id")] = o
        if o["kind"] in ("alloc.stop", "drain.stop") and o["outcome"] != "fail":
            stops.setdefault(o.get("alloc_id"), o["invoke"])
    for o in h["ops"]:
        if o["kind"] != "alloc.submit" or o["invoke"] < healed or o["outcome"] != "ok":
            continue
        alloc_id = o.get("value")
        last = final_reads.get(alloc_id, {})
        if alloc_id in h["tasks"] or last.get("started"):
            continue
        if last.get("client_status") in ("failed", "lost") and last.get("last_event"):
            continue
        if stops.get(alloc_id, float("inf")) - o["complete"] < SUBMIT_TO_START_S * 1e9:
            continue
        out.append(violation("liveness", f"allocation {alloc_id} ({o['obj']}) submitted after the heal neither "
                             f"started within {SUBMIT_TO_START_S}s nor was refused with a reason (last seen "
                             f"{last.get('client_status')}: {last.get('last_event', '')!r})",
                             {"submit": op_evidence(h, o), "last_read": op_evidence(h, last) if last else None}))
    return out


def settle_times(h):
    """For each heal: seconds until every claim that was being released at that moment was freed."""
    claims = list(claims_of(h).values())
    times, unsettled = [], 0
    for f in h["faults"]:
        if f.get("ev") != "heal":
            continue
        t = f["t"]
        pending = [c for c in claims if c["releasing"] is not None and c["releasing"] <= t
                   and (c["released"] is None or c["released"] > t)]
        if not pending:
            continue
        if any(c["released"] is None for c in pending):
            unsettled += 1
            continue
        times.append((max(c["released"] for c in pending) - t) / 1e9)
    return times, unsettled


def percentile(values, p):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]
