"""The `drain` part of `make bench` (issue 44 part B.2, docs/node-drain.md): a drain's volume handoff
on the real stack, Release and secure as `make run` starts it: a control plane (SQLite) and three
node agents each with its hostpath plugin. MOORING_BENCH_DRAIN_N (10) allocations with
single-node-writer volumes, marked Migrate, run on d1; each of MOORING_BENCH_DRAIN_ROUNDS (10)
rounds drains d1 (their replacements go to d2 and d3), waits for the drain to complete, marks d1
eligible again and then, as the same-run reference, moves every replacement back to d1 by hand, as
an operator without drain does: stop it, wait (a blocking query) until its volume is free, submit a
new allocation on d1. Both ways are measured on the same records:
  handoff     per volume, the old claim freed (its ClaimReleased event, the control plane's clock)
              -> the new node's NodePublishVolume answered OK (that plugin's call log);
  all running drain start (the PUT) / the first stop -> the last new allocation's Started event;
  stop        per volume, the old allocation's StopRequested -> the new NodePublish (what a user
              of the volume waits for, the task's kill and the release included).
The handoff target is p50 and p99 <= 100 ms. A replacement that waited on a refused claim
(ClaimWaiting), failed, or published before the old node's NodeUnpublish (two writers) is counted.
Driven by run_bench.py, which passes itself as `rb` (row, log, new_cluster, close_cluster,
details, TASK, parse_time_ms).
"""

import os
import threading
import time

from harness import now_ms, percentile

ROUNDS = int(os.environ.get("MOORING_BENCH_DRAIN_ROUNDS", "10"))
ALLOCS = int(os.environ.get("MOORING_BENCH_DRAIN_N", "10"))
SOURCE = "d1"
NODES = ("d1", "d2", "d3")
TARGET_MS = 100


class Round:
    """The records of one way (drain or by hand) of one round."""

    def __init__(self):
        self.start_ms = 0.0
        self.moves = []  # (vid, old alloc, new alloc)
        self.handoff, self.stop_to_mounted, self.stages = [], [], {}
        self.all_running_ms = None
        self.bad = []  # what went wrong: waited claims, failures, overlaps


def submit(rb, c, i, vid, node):
    a = {"Name": f"drain-{i}", "NodeID": node, "Migrate": True,
         "Volumes": {"data": {"Type": "csi", "Source": vid, "AccessMode": "single-node-writer",
                              "AttachmentMode": "file-system"}},
         "Task": {"Command": "/bin/sh", "Args": ["-c", rb.TASK], "KillTimeout": "2s"}}
    return c.api.json("POST", "/v1/allocations", {"Allocation": a})["ID"]


def wait_all(c, ids, want, timeout=120):
    """Until every allocation of `ids` has ClientStatus `want`, through blocking queries of the list."""
    deadline, index = time.monotonic() + timeout, 0
    while time.monotonic() < deadline:
        allocs, index = c.api.get_blocking("/v1/allocations", index, "5s")
        status = {a["ID"]: a.get("ClientStatus") for a in allocs}
        if all(status.get(i) == want for i in ids):
            return
    raise RuntimeError(f"allocations not {want} after {timeout}s")


def event_ms(rb, events, type_):
    for e in events or []:
        if e.get("Type") == type_:
            return rb.parse_time_ms(e["Time"])
    return None


def first_ok(calls, rpc, csi_id, after_ms):
    """The first call of `rpc` on the volume answered OK at or after `after_ms` (Unix ms), or None."""
    for call in calls:
        if call.get("rpc") == rpc and call.get("volume_id") == csi_id and call.get("code_name") == "OK" \
                and call.get("unix_ms", 0) >= after_ms:
            return call
    return None


def mono_ms(call):
    """When the plugin answered, on the machine's monotonic clock (the events' MonotonicNs clock), ms."""
    return call["end_mono_ns"] / 1e6


def read_round(rb, c, r, external, freed_since):
    """Fills `r` from the records: claim events, allocation events, the plugins' call logs. The
    handoff's two ends are on the monotonic clock (ns); the rest on the wall clock (ms)."""
    freed = {}
    for e in c.api.json("GET", f"/v1/events?type=ClaimReleased&index={freed_since}"):
        freed[(e.get("Key"), (e.get("Details") or {}).get("allocation_id"))] = e["MonotonicNs"] / 1e6
    calls = {n: c.calls(n) for n in NODES}
    controller = sorted((x for n in NODES for x in calls[n]), key=lambda x: x.get("end_mono_ns", 0))
    started = []
    for vid, old, new in r.moves:
        o = c.api.json("GET", f"/v1/allocation/{old}")
        a = c.api.json("GET", f"/v1/allocation/{new}")
        node, csi_id = a.get("NodeID"), external[vid]
        for e in a.get("Events") or []:
            if e.get("Type") in ("ClaimWaiting", "Failed") or "failed" in e.get("Message", ""):
                r.bad.append(f"{vid}: {e.get('Type')}: {e.get('Message', '')[:200]}")
        started.append(event_ms(rb, a.get("Events"), "Started"))
        t_freed = freed.get((vid, old))
        published = first_ok(calls.get(node, []), "NodePublishVolume", csi_id, r.start_ms)
        unpublished = [x for x in calls[o.get("NodeID")] if x.get("rpc") == "NodeUnpublishVolume"
                       and x.get("volume_id") == csi_id and x.get("code_name") == "OK"
                       and x.get("unix_ms", 0) >= r.start_ms]
        if t_freed is None or published is None or not unpublished:
            r.bad.append(f"{vid}: missing record (freed {t_freed}, published {published}, "
                         f"old unpublish {len(unpublished)})")
            continue
        if mono_ms(published) < mono_ms(unpublished[-1]):
            r.bad.append(f"{vid}: published on {node} before the old node's NodeUnpublish")
        r.handoff.append(mono_ms(published) - t_freed)
        stop = event_ms(rb, o.get("Events"), "StopRequested")
        if stop is not None:
            r.stop_to_mounted.append(published["unix_ms"] - stop)
        for name, rpc, log in (("freed -> ControllerPublish answered", "ControllerPublishVolume", controller),
                               ("freed -> NodeStage answered", "NodeStageVolume", calls.get(node, []))):
            at = first_ok(log, rpc, csi_id, r.start_ms)
            if at is not None:
                r.stages.setdefault(name, []).append(mono_ms(at) - t_freed)
    if started and None not in started:
        r.all_running_ms = max(started) - r.start_ms


def drain_round(rb, c, olds, external):
    r = Round()
    since = c.api.json("GET", "/v1/status/ready")["Index"]
    r.start_ms = now_ms()
    c.api.json("PUT", f"/v1/node/{SOURCE}/drain", {"Deadline": "1m"})
    deadline, index, reps = time.monotonic() + 120, 0, {}
    while time.monotonic() < deadline:
        allocs, index = c.api.get_blocking("/v1/allocations", index, "5s")
        reps = {a.get("MigratedFrom"): a for a in allocs if a.get("MigratedFrom") in olds.values()}
        if len(reps) == len(olds) and all(a.get("ClientStatus") == "running" for a in reps.values()):
            break
    else:
        raise RuntimeError(f"replacements not running after 120s: {len(reps)} of {len(olds)} placed")
    index = 0
    while c.api.json("GET", f"/v1/node/{SOURCE}").get("LastDrain", {}).get("Status") != "complete":
        _, index = c.api.get_blocking(f"/v1/node/{SOURCE}", index, "5s")
    r.moves = [(vid, old, reps[old]["ID"]) for vid, old in olds.items()]
    read_round(rb, c, r, external, since)
    return r


def by_hand_round(rb, c, current, external):
    """The reference: each allocation moved back to d1 by hand, all at once (one thread each)."""
    r = Round()
    since = c.api.json("GET", "/v1/status/ready")["Index"]
    c.api.json("PUT", f"/v1/node/{SOURCE}/eligibility", {"Eligible": True})
    moved, errors = {}, []

    def move(i, vid, old):
        try:
            c.stop_alloc(old)
            c.wait_volume_free(vid)
            moved[vid] = submit(rb, c, i, vid, SOURCE)
        except Exception as e:  # noqa: BLE001 - counted and reported
            errors.append(f"{vid}: {e}")

    r.start_ms = now_ms()
    threads = [threading.Thread(target=move, args=(i, vid, old), daemon=True)
               for i, (vid, old) in enumerate(current.items())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("by-hand move failed: " + "; ".join(errors[:3]))
    wait_all(c, list(moved.values()), "running")
    r.moves = [(vid, old, moved[vid]) for vid, old in current.items()]
    read_round(rb, c, r, external, since)
    return r, moved


def bench_drain(rb):
    load = [os.getloadavg()[0]]  # the machine is shared: the tails move with its load
    c = rb.new_cluster("drain")
    try:
        c.start_controlplane()
        for n in NODES:
            c.start_node(n)
        vids = [f"dv-{i:02d}" for i in range(ALLOCS)]
        for vid in vids:
            c.create_volume(vid)
        external = {vid: c.api.json("GET", f"/v1/volume/csi/{vid}")["ExternalID"] for vid in vids}
        current = {vid: submit(rb, c, i, vid, SOURCE) for i, vid in enumerate(vids)}
        wait_all(c, list(current.values()), "running")
        drains, hands = [], []
        for k in range(ROUNDS):
            d = drain_round(rb, c, current, external)
            drains.append(d)
            current = {vid: new for vid, _, new in d.moves}
            h, current = by_hand_round(rb, c, current, external)
            hands.append(h)
            rb.log(f"drain: round {k + 1}/{ROUNDS}: handoff p50 {percentile(d.handoff, 50):.0f} ms "
                   f"(by hand {percentile(h.handoff, 50):.0f}), all running {d.all_running_ms or 0:.0f} ms "
                   f"(by hand {h.all_running_ms or 0:.0f})")
        load.append(os.getloadavg()[0])
        report(rb, drains, hands, load)
    finally:
        rb.close_cluster(c)


def pooled(rounds, attr):
    return [x for r in rounds for x in getattr(r, attr)]


def report(rb, drains, hands, load):
    hd, hh = pooled(drains, "handoff"), pooled(hands, "handoff")
    sd, sh = pooled(drains, "stop_to_mounted"), pooled(hands, "stop_to_mounted")
    ad = [r.all_running_ms for r in drains if r.all_running_ms is not None]
    ah = [r.all_running_ms for r in hands if r.all_running_ms is not None]
    stages = {}
    for r in drains:
        for k, v in r.stages.items():
            stages.setdefault(k, []).extend(v)
    bad = pooled(drains, "bad")
    stage_p50 = {k: percentile(v, 50) for k, v in stages.items()}
    rb.details["drain"] = {
        "rounds": len(drains), "allocations": ALLOCS,
        "handoff_ms": {"drain": hd, "by_hand": hh}, "stop_to_mounted_ms": {"drain": sd, "by_hand": sh},
        "all_running_ms": {"drain": ad, "by_hand": ah}, "drain_stages_p50_ms": stage_p50, "problems": bad[:50],
        "load_average": load}
    rb.log(f"drain: where the handoff goes (p50, ms): {stage_p50}")
    how = f"{len(hh)} volumes moved by hand: stop, wait for the free, submit on d1"
    rb.row("drain", f"handoff: old claim freed -> new NodePublish, p50 ({len(hd)} volumes)", percentile(hd, 50), "ms",
           percentile(hh, 50), how, ("value", "<=", TARGET_MS))
    rb.row("drain", "handoff: old claim freed -> new NodePublish, p99", percentile(hd, 99), "ms", percentile(hh, 99),
           "the same by hand, p99", ("value", "<=", TARGET_MS),
           f"max {max(hd or [0]):.0f} ms; load average {load[0]:.1f} at the start, {load[-1]:.1f} at the end")
    rb.row("drain", "per volume: old StopRequested -> new NodePublish, p50", percentile(sd, 50), "ms",
           percentile(sh, 50), "stop by hand -> the new allocation's NodePublish",
           note=f"p99 {percentile(sd, 99):.0f} ms (by hand {percentile(sh, 99):.0f} ms)")
    rb.row("drain", f"drain start -> all {ALLOCS} replacements running, p50 ({len(ad)} rounds)", percentile(ad, 50),
           "ms", percentile(ah, 50), f"the first stop by hand -> all {ALLOCS} new allocations running",
           note=f"max {max(ad or [0]):.0f} ms (by hand {max(ah or [0]):.0f} ms)")
    rb.row("drain", "replacements that waited on a refused claim, failed, or overlapped a writer", len(bad), "", None,
           "", ("value", "<=", 0))
