"""The checker's claim properties, over the history checker.load() reads. Every time is
CLOCK_MONOTONIC in ns: the tasks', the plugins' and the control planes' own stamps.

  single-writer          (1) no two tasks with write access ran at overlapping times on a
                         single-writer volume
  published-while-running (2) no task ran while its volume was not NodePublished to it on its node,
                         nor while it was not ControllerPublished to that node
  release-order          (3) a claim the control plane reported freed had its NodeUnpublish, its
                         NodeUnstage (unless another claim on the node still used the volume) and
                         its ControllerUnpublish (likewise) completed before; and a claim dropped
                         (its publish failed) as the last on its node left the volume detached there
  intent-before-publish  (3) no ControllerPublish reached a plugin before a claim of the volume
                         on that node was recorded (the intent)
and the count of controller calls that reached a plugin for a publication already in that state."""

SINGLE_WRITER = {"single-node-writer", "single-node-single-writer", "multi-node-single-writer"}
RELEASING = {"ClaimReleaseRequested", "ClaimNodeDetached", "ClaimControllerDetached", "ClaimStepSkipped",
             "ClaimReleaseFailed"}


def violation(prop, message, evidence):
    return {"property": prop, "message": message, "evidence": evidence}


def fmt_t(h, t):
    """Seconds since the run's start, for messages."""
    return "never" if t is None else f"{(t - h['t0']) / 1e9:.3f}s"


# ---- (1) ----
def single_writer(h):
    out = []
    by_volume = {}
    for t in h["tasks"].values():
        if t["mode"] == "write" and t["volume"] and h["volume_mode"].get(t["volume"]) in SINGLE_WRITER:
            by_volume.setdefault(t["volume"], []).append(t)
    h["checked"]["writer tasks of single-writer volumes"] = sum(len(t) for t in by_volume.values())
    for vid, tasks in by_volume.items():
        tasks.sort(key=lambda t: t["start"])
        for i, a in enumerate(tasks):
            for b in tasks[i + 1:]:
                if b["start"] >= a["last"]:
                    break
                out.append(violation(
                    "single-writer",
                    f"volume {vid} ({h['volume_mode'][vid]}): writers {a['alloc']} on {a['node']} and "
                    f"{b['alloc']} on {b['node']} ran at the same time "
                    f"({fmt_t(h, b['start'])} .. {fmt_t(h, min(a['last'], b['last']))})",
                    [task_evidence(h, a), task_evidence(h, b)]))
    return out


def task_evidence(h, t):
    return {"task": t["alloc"], "name": t["name"], "node": t["node"], "volume": t["volume"], "mode": t["mode"],
            "start": fmt_t(h, t["start"]), "last_seen": fmt_t(h, t["last"]), "exit": fmt_t(h, t["exit"])}


def call_evidence(h, c):
    return {"node": c["node"], "rpc": c["rpc"], "volume_id": c["volume_id"], "csi_node": c["node_id"],
            "path": c["path"], "code": c["code_name"], "start": fmt_t(h, c["start"]), "end": fmt_t(h, c["end"]),
            "pid": c["pid"]}


def event_evidence(h, e):
    return {"index": e["Index"], "type": e["Type"], "volume": e["Key"], "details": e.get("Details", {}),
            "at": fmt_t(h, e["MonotonicNs"]), "from": e.get("From")}


# ---- (2) ----
def published_while_running(h):
    out = []
    h["checked"]["task records against publications"] = sum(len(t["moments"]) for t in h["tasks"].values())
    for t in h["tasks"].values():
        calls = h["calls_by_path"].get((t["node"], t["path"]), [])
        publishes = [c for c in calls if c["rpc"] == "NodePublishVolume" and c["code_name"] == "OK"]
        unpublishes = [c for c in calls if c["rpc"] == "NodeUnpublishVolume"]
        bad = [x for x in t["moments"] if not published_at(x, publishes, unpublishes)]
        if bad:
            out.append(violation(
                "published-while-running",
                f"task {t['alloc']} on {t['node']} ran at {fmt_t(h, bad[0])} while {t['path']} was not "
                f"NodePublished to it ({len(bad)} of its {len(t['moments'])} records)",
                [task_evidence(h, t)] + [call_evidence(h, c) for c in calls[:8]]))
        bad_set = set(bad)
        lost = [x for x in t["moments"] if x not in bad_set and not controller_held(h, t, x)]
        if lost:
            ext = h["ext_of"].get(t["volume"])
            out.append(violation(
                "published-while-running",
                f"task {t['alloc']} on {t['node']} ran at {fmt_t(h, lost[0])} while {t['volume']} was not "
                f"ControllerPublished to csi-{t['node']} ({len(lost)} of its {len(t['moments'])} records)",
                [task_evidence(h, t)] + [call_evidence(h, c) for c in sorted(
                    (c for c in h["controller_by_ext"].get(ext, []) if c["end"] <= lost[0]),
                    key=lambda c: c["end"])][-6:]))
        unmounted = [x for x, mounted in t["mounted"] if mounted is False]
        if unmounted and not bad:
            out.append(violation(
                "published-while-running",
                f"task {t['alloc']} on {t['node']} found {t['path']} not mounted at {fmt_t(h, unmounted[0])}",
                [task_evidence(h, t)] + [call_evidence(h, c) for c in calls[:8]]))
    return out


def controller_held(h, t, x):
    """The volume was ControllerPublished to the task's node at x: its last OK controller call for
    that node that ended by x was a publish. Volumes never ControllerPublished to the node (a
    plugin without the controller step) are not checked."""
    ext = h["ext_of"].get(t["volume"])
    csi_node = f"csi-{t['node']}"
    calls = h["controller_by_ext"].get(ext, []) if ext else []
    if not any(c["rpc"] == "ControllerPublishVolume" and c["node_id"] == csi_node and c["code_name"] == "OK"
               for c in calls):
        return True
    return controller_published_at(h, ext, csi_node, x)


def published_at(x, publishes, unpublishes):
    """Some NodePublish completed before x with no NodeUnpublish begun between it and x."""
    for p in publishes:
        if p["end"] <= x and not any(p["end"] <= u["start"] <= x for u in unpublishes):
            return True
    return False


# ---- (3) ----
def release_order(h):
    out = []
    for e in h["events"]:
        if e["Type"] not in ("ClaimReleased", "ClaimDropped"):
            continue
        h["checked"]["freed or dropped claims"] = h["checked"].get("freed or dropped claims", 0) + 1
        d = e.get("Details", {})
        vid, alloc, node, freed = e["Key"], claim_alloc(e), d.get("node_id", ""), e["MonotonicNs"]
        evidence = [event_evidence(h, e)]
        target = h["calls_by_alloc"].get((node, alloc, vid), [])
        published = [c for c in target if c["rpc"] == "NodePublishVolume" and c["start"] < freed]
        unpublished = [c for c in target if c["rpc"] == "NodeUnpublishVolume" and c["code_name"] == "OK"
                       and c["end"] <= freed and all(p["start"] <= c["start"] for p in published)]
        missing = []
        if published and not unpublished:
            missing.append("NodeUnpublishVolume")
            evidence += [call_evidence(h, c) for c in target[-4:]]
        others = other_claims(h, vid, node, alloc, freed)
        stages = h["stage_calls"].get((node, vid), [])
        if not others and staged_at(stages, freed):
            missing.append("NodeUnstageVolume")
            evidence += [call_evidence(h, c) for c in stages if c["start"] < freed][-4:]
        ext = h["ext_of"].get(vid)
        if not others and ext and controller_published_at(h, ext, f"csi-{node}", freed):
            missing.append("ControllerUnpublishVolume")
            evidence += [call_evidence(h, c) for c in h["controller_by_ext"].get(ext, []) if c["start"] < freed][-4:]
        if missing:
            # A dropped claim (its ControllerPublish certainly failed) published nothing itself, but
            # the last claim of a node to go must leave the volume detached from it.
            how = "dropped" if e["Type"] == "ClaimDropped" else "freed"
            out.append(violation(
                "release-order",
                f"claim of {alloc} on volume {vid} (node {node}) {how} at {fmt_t(h, freed)}, the last on the node, "
                f"before {' and '.join(missing)} completed", evidence))
    return out


def other_claims(h, vid, node, alloc, t):
    """Claims of the volume on the node, other than alloc's, taken and not freed at t."""
    live = set()
    for e in h["events_by_volume"].get(vid, []):
        if e["MonotonicNs"] > t:
            break
        if e.get("Details", {}).get("node_id") != node:
            continue
        a = e.get("Details", {}).get("alloc_id") or e.get("Details", {}).get("allocation_id")
        if e["Type"] == "ClaimTaken":
            live.add(a)
        elif e["Type"] in ("ClaimReleased", "ClaimDropped"):
            live.discard(a)
    live.discard(alloc)
    return live


def staged_at(stage_calls, t):
    """Some staging path of the volume on the node (one per usage) whose last OK NodeStage or
    NodeUnstage that ended by t was a stage."""
    last = {}
    for c in stage_calls:
        if c["code_name"] == "OK" and c["end"] <= t and (c["path"] not in last or c["end"] > last[c["path"]]["end"]):
            last[c["path"]] = c
    return any(c["rpc"] == "NodeStageVolume" for c in last.values())


def controller_published_at(h, ext, csi_node, t):
    last = None
    for c in h["controller_by_ext"].get(ext, []):
        if c["node_id"] in (csi_node, "") and c["code_name"] == "OK" and c["end"] <= t:
            if c["rpc"] == "ControllerPublishVolume" and c["node_id"] != csi_node:
                continue
            if last is None or c["end"] > last["end"]:
                last = c
    return last is not None and last["rpc"] == "ControllerPublishVolume"


def intent_before_publish(h):
    out = []
    vid_of = h["vid_of"]
    for c in h["controller_calls"]:
        if c["rpc"] != "ControllerPublishVolume":
            continue
        h["checked"]["ControllerPublish calls"] = h["checked"].get("ControllerPublish calls", 0) + 1
        vid = vid_of.get(c["volume_id"])
        node = c["node_id"][4:] if c["node_id"].startswith("csi-") else c["node_id"]
        if vid is None:
            continue
        if not other_claims(h, vid, node, None, c["start"]):
            later = [e for e in h["events_by_volume"].get(vid, []) if e["Type"] == "ClaimTaken"
                     and e.get("Details", {}).get("node_id") == node and e["MonotonicNs"] >= c["start"]][:1]
            out.append(violation(
                "intent-before-publish",
                f"ControllerPublishVolume of {vid} to {c['node_id']} reached the plugin at {fmt_t(h, c['start'])} "
                f"with no claim of the volume on {node} recorded before it",
                [call_evidence(h, c)] + [event_evidence(h, e) for e in later]))
    return out


# ---- duplicates ----
def duplicate_controller_calls(h):
    """ControllerPublish/Unpublish calls sent more than once for one claim (the issue's figure).
    A publish belongs to the newest claim of the volume on that node taken before it began; an
    unpublish to the first claim of the volume on that node freed after it began. Not
    violations (the calls are idempotent), but each is work a careful orchestrator avoids."""
    per_claim, dups = {}, []
    for c in h["controller_calls"]:
        vid = h["vid_of"].get(c["volume_id"])
        node = c["node_id"][4:] if c["node_id"].startswith("csi-") else c["node_id"]
        events = h["events_by_volume"].get(vid, [])
        mine = [e for e in events if e.get("Details", {}).get("node_id") == node]
        if c["rpc"] == "ControllerPublishVolume":
            taken = [e for e in mine if e["Type"] == "ClaimTaken" and e["MonotonicNs"] <= c["start"]]
            owner = claim_alloc(taken[-1]) if taken else None
        else:
            freed = [e for e in mine if e["Type"] in ("ClaimReleased", "ClaimControllerDetached")
                     and e["MonotonicNs"] >= c["start"]]
            owner = claim_alloc(freed[0]) if freed else None
        if owner is None:
            continue
        key = (c["rpc"], vid, owner)
        per_claim[key] = per_claim.get(key, 0) + 1
        if per_claim[key] > 1:
            dups.append(c)
    return dups


def claim_alloc(e):
    d = e.get("Details", {})
    return d.get("alloc_id") or d.get("allocation_id")


def redundant_controller_calls(h):
    """Controller calls that reached a plugin for a publication already in the state they ask
    for: a ControllerPublish of a (volume, node) whose last OK call was a publish (a second
    claim on the node, or a resend), an Unpublish of one not published."""
    state, dups = {}, []
    for c in sorted(h["controller_calls"], key=lambda c: c["start"]):
        key = (c["volume_id"], c["node_id"])
        if c["rpc"] == "ControllerPublishVolume":
            if state.get(key) == "published":
                dups.append(c)
        elif c["node_id"] and state.get(key) != "published":
            dups.append(c)
        if c["code_name"] == "OK":
            state[key] = "published" if c["rpc"] == "ControllerPublishVolume" else "unpublished"
    return dups


def check(h):
    return single_writer(h) + published_while_running(h) + release_order(h) + intent_before_publish(h)
