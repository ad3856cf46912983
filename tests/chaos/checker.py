#!/usr/bin/env python3
"""The chaos checker: reads a run's whole history and reports every violation of the six
properties of issue 43 with the records that prove it (claims_check.py: 1, 2, 3;
state_check.py: 4, 5, 6), and the run's figures.

  checker.py RUN_DIR        writes RUN_DIR/report.json and report.txt; exit 1 on violations

The history (all times CLOCK_MONOTONIC in ns, one clock for every process and namespace):
  ops.jsonl        client operations: invoke, complete, outcome ok|fail|info, value read
  events.jsonl     the control planes' event stream (MonotonicNs: the commit of each event)
  calls/NODE.jsonl every CSI call the node's plugin received (start_mono_ns, end_mono_ns, code)
  tasks/ALLOC.jsonl each task's own start, beats (with its volume's mount state) and exit
  faults.jsonl     each fault's start and heal;  final.json  the end state;  run.json  the run"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import claims_check  # noqa: E402
import state_check  # noqa: E402

PROPERTIES = [  # (name, the number, what it means)
    ("single-writer", 1, "no two writers overlapped on a single-writer volume"),
    ("published-while-running", 2, "no task ran while its volume was not Node- and ControllerPublished to it"),
    ("release-order", 3, "no claim was freed before its NodeUnpublish, NodeUnstage and ControllerUnpublish"),
    ("intent-before-publish", 3, "no ControllerPublish before the claim's intent was recorded"),
    ("linearizable", 4, "reads of volumes and allocations are linearizable"),
    ("durable", 4, "every acknowledged write is there afterwards"),
    ("nothing-left", 5, "nothing is left after the heal and the drain"),
    ("liveness", 6, "after the heal, stops free within 10 s and submits run or are refused"),
    ("sanitizer", 0, "no process reported a sanitizer error (test builds)"),
    ("no-crash", 0, "no process exited unless a fault killed it"),
]
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer")


def read_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a torn last line (a process killed mid-write)
    return out


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def path_parts(path):
    """(alloc, volume) of a publish target .../per-alloc/ALLOC/VOLUME/USAGE, (None, volume) of a
    staging path .../staging/VOLUME/USAGE, (None, None) otherwise."""
    parts = path.split("/")
    if "per-alloc" in parts:
        i = len(parts) - 1 - parts[::-1].index("per-alloc")
        if i + 3 < len(parts) + 1 and len(parts) >= i + 4:
            return parts[i + 1], parts[i + 2]
    if "staging" in parts:
        i = len(parts) - 1 - parts[::-1].index("staging")
        if len(parts) >= i + 3:
            return None, parts[i + 1]
    return None, None


def load_calls(run_dir, h):
    calls, controller = {}, []
    for name in sorted(os.listdir(os.path.join(run_dir, "calls"))) if os.path.isdir(os.path.join(run_dir, "calls")) else []:
        node = name.rsplit(".", 1)[0]
        for c in read_jsonl(os.path.join(run_dir, "calls", name)):
            if "end_mono_ns" not in c:
                continue
            alloc, vid = path_parts(c.get("path", ""))
            rec = {"node": node, "rpc": c["rpc"], "volume_id": c.get("volume_id", ""), "node_id": c.get("node_id", ""),
                   "path": c.get("path", ""), "code_name": c.get("code_name", ""), "start": c["start_mono_ns"],
                   "end": c["end_mono_ns"], "pid": c.get("pid"), "alloc": alloc, "vid": vid}
            calls.setdefault(node, []).append(rec)
            if vid and rec["volume_id"]:
                h["vid_of"].setdefault(rec["volume_id"], vid)
                h["ext_of"].setdefault(vid, rec["volume_id"])
            if rec["rpc"] in ("ControllerPublishVolume", "ControllerUnpublishVolume"):
                controller.append(rec)
    for node, cs in calls.items():
        cs.sort(key=lambda c: c["start"])
        for c in cs:
            h["calls_by_path"].setdefault((node, c["path"]), []).append(c)
            if c["alloc"]:
                h["calls_by_alloc"].setdefault((node, c["alloc"], c["vid"]), []).append(c)
            if c["rpc"] in ("NodeStageVolume", "NodeUnstageVolume") and c["vid"]:
                h["stage_calls"].setdefault((node, c["vid"]), []).append(c)
    controller.sort(key=lambda c: c["start"])
    h["calls"], h["controller_calls"] = calls, controller
    for c in controller:
        h["controller_by_ext"].setdefault(c["volume_id"], []).append(c)


def load_tasks(run_dir, h, submits):
    tasks = {}
    d = os.path.join(run_dir, "tasks")
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        recs = read_jsonl(os.path.join(d, name))
        start = next((r for r in recs if r.get("ev") == "start"), None)
        if not start:
            continue
        moments = [r["t"] for r in recs]
        exit_t = next((r["t"] for r in recs if r.get("ev") == "exit"), None)
        _, vid = path_parts(start.get("path", ""))
        sub = submits.get(start["alloc"], {})
        tasks[start["alloc"]] = {
            "alloc": start["alloc"], "name": start.get("name", ""), "node": start.get("node", ""),
            "path": start.get("path", ""), "mode": start.get("mode"), "volume": vid or sub.get("volume"),
            "start": start["t"], "last": max(moments), "exit": exit_t, "moments": moments,
            "mounted": [(r["t"], r.get("mounted")) for r in recs if r.get("ev") == "beat"]}
    h["tasks"] = tasks


def load(run_dir):
    h = {"run": read_json(os.path.join(run_dir, "run.json"), {}), "final": read_json(os.path.join(run_dir, "final.json")),
         "ops": read_jsonl(os.path.join(run_dir, "ops.jsonl")), "faults": read_jsonl(os.path.join(run_dir, "faults.jsonl")),
         "vid_of": {}, "ext_of": {}, "calls_by_path": {}, "calls_by_alloc": {}, "stage_calls": {},
         "controller_by_ext": {}, "volume_mode": {}, "checked": {}}
    h["ops"].sort(key=lambda o: o["invoke"])
    h["t0"] = h["run"].get("t0") or (h["ops"][0]["invoke"] if h["ops"] else 0)
    events = read_jsonl(os.path.join(run_dir, "events.jsonl"))
    seen, unique = set(), []
    for e in events:  # a reconnect may repeat an index
        key = (e.get("Index"), e.get("Type"), e.get("Key"), json.dumps(e.get("Details"), sort_keys=True))
        if key not in seen:
            seen.add(key)
            unique.append(e)
    unique.sort(key=lambda e: (e.get("MonotonicNs", 0), e.get("Index", 0)))
    h["events"] = unique
    h["events_by_volume"] = {}
    for e in unique:
        h["events_by_volume"].setdefault(e.get("Key"), []).append(e)
    submits = {}
    for o in h["ops"]:
        if o["kind"] == "volume.create":
            h["volume_mode"][o["obj"]] = o.get("mode")
        if o.get("ext") and o["kind"].startswith("volume"):
            h["ext_of"].setdefault(o["obj"], o["ext"])
            h["vid_of"].setdefault(o["ext"], o["obj"])
        if o["kind"] == "alloc.submit" and o.get("value"):
            submits[o["value"]] = o
    load_calls(run_dir, h)
    load_tasks(run_dir, h, submits)
    return h


def seconds(x):
    return None if x is None else round(x, 3)


def figures(h, violations, lin_stats):
    ops = {}
    for o in h["ops"]:
        k = ops.setdefault(o["kind"], {"ok": 0, "fail": 0, "info": 0})
        k[o["outcome"]] += 1
    faults = {}
    for f in h["faults"]:
        if f.get("ev") in ("start", "skip"):
            k = faults.setdefault(f["kind"], {"started": 0, "skipped": 0})
            k["started" if f["ev"] == "start" else "skipped"] += 1
    claims = sum(1 for e in h["events"] if e["Type"] == "ClaimTaken")
    dups = claims_check.duplicate_controller_calls(h)
    redundant = claims_check.redundant_controller_calls(h)
    settle, unsettled = state_check.settle_times(h)
    by_prop = {name: 0 for name, _, _ in PROPERTIES}
    for v in violations:
        by_prop[v["property"]] = by_prop.get(v["property"], 0) + 1
    return {
        "operations": ops, "in_doubt": sum(k["info"] for k in ops.values()), "faults": faults,
        "violations": by_prop, "claims": claims, "tasks": len(h["tasks"]),
        "plugin_calls": sum(len(c) for c in h["calls"].values()), "events": len(h["events"]),
        "duplicate_controller_calls": len(dups),
        "duplicates_per_1000_claims": round(1000 * len(dups) / claims, 1) if claims else None,
        "duplicate_examples": [claims_check.call_evidence(h, c) for c in dups[:5]],
        "redundant_controller_calls": len(redundant),
        "redundant_examples": [claims_check.call_evidence(h, c) for c in redundant[:5]],
        "heal_to_settled_s": {"heals_with_pending_releases": len(settle) + unsettled, "unsettled": unsettled,
                              "p50": seconds(state_check.percentile(settle, 50)),
                              "p99": seconds(state_check.percentile(settle, 99)),
                              "max": seconds(max(settle) if settle else None)},
        "linearizability": lin_stats,
        "checked": h["checked"],
    }


def sanitizer_reports(run_dir):
    out = []
    d = os.path.join(run_dir, "logs")
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, name), errors="replace") as f:
            for n, line in enumerate(f, 1):
                if any(m in line for m in SANITIZER_MARKS):
                    out.append(claims_check.violation("sanitizer", f"logs/{name}:{n}: {line.strip()[:300]}",
                                                      {"log": name, "line": n}))
                    break
    return out


def crashes(h):
    return [claims_check.violation("no-crash", f"{f['member']} exited by itself (code {f['code']}) at "
                                   f"{claims_check.fmt_t(h, f['t'])}; the harness started it again", f)
            for f in h["faults"] if f.get("ev") == "exited"]


def check(run_dir):
    h = load(run_dir)
    violations = sanitizer_reports(run_dir) + crashes(h) + claims_check.check(h)
    lin, lin_stats = state_check.linearizable(h)
    violations += lin + state_check.nothing_left(h) + state_check.liveness(h)
    return {"run": h["run"], "violations": violations, "figures": figures(h, violations, lin_stats)}


def summary(report):
    f = report["figures"]
    lines = [f"chaos checker: {len(report['violations'])} violation(s)"]
    for name, number, what in PROPERTIES:
        n = f["violations"].get(name, 0)
        lines.append(f"  [{number}] {name:24} {'ok' if n == 0 else f'{n} VIOLATION(S)':>14}  {what}")
    ops = ", ".join(f"{k} {sum(v.values())}" for k, v in sorted(f["operations"].items()))
    lines.append(f"  operations: {ops}; in doubt {f['in_doubt']}")
    lines.append("  faults: " + (", ".join(f"{k} {v['started']}" + (f" (+{v['skipped']} skipped)" if v["skipped"] else "")
                                          for k, v in sorted(f["faults"].items())) or "none"))
    s = f["heal_to_settled_s"]
    lines.append(f"  claims {f['claims']}, tasks {f['tasks']}, plugin calls {f['plugin_calls']}, events {f['events']}; "
                 f"duplicate controller calls {f['duplicate_controller_calls']} "
                 f"({f['duplicates_per_1000_claims']} per 1000 claims); calls for a publication already in "
                 f"that state {f['redundant_controller_calls']}")
    lines.append(f"  heal -> settled: p50 {s['p50']} s, p99 {s['p99']} s, max {s['max']} s "
                 f"over {s['heals_with_pending_releases']} heals ({s['unsettled']} never settled)")
    lines.append("  checked: " + ", ".join(f"{v} {k}" for k, v in sorted(f["checked"].items())))
    lin = f["linearizability"]
    lines.append(f"  linearizability: {lin['objects']} objects, {lin['gave_up']} too large to decide, "
                 f"{lin['stale_reads']} stale reads not checked")
    for v in report["violations"][:40]:
        lines.append(f"  VIOLATION {v['property']}: {v['message']}")
    if len(report["violations"]) > 40:
        lines.append(f"  ... {len(report['violations']) - 40} more in report.json")
    return "\n".join(lines)


def write_report(run_dir, report):
    with open(os.path.join(run_dir, "report.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    with open(os.path.join(run_dir, "report.txt"), "w") as f:
        f.write(summary(report) + "\n\n")
        for v in report["violations"]:
            f.write(f"== {v['property']}: {v['message']}\n{json.dumps(v['evidence'], indent=1, default=str)}\n\n")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    report = check(sys.argv[1])
    write_report(sys.argv[1], report)
    print(summary(report))
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
