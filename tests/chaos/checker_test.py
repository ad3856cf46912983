#!/usr/bin/env python3
"""The chaos checker on histories written by hand: each property passes a history that keeps
it and reports the violation, with its evidence, of one that breaks it. No cluster, no root."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402
import faults  # noqa: E402
import linearizability  # noqa: E402

S = 1_000_000_000  # one second in ns
VOL, EXT = "vol1", "ext-1"


def target(node, alloc, vid=VOL):
    return f"/run/{node}/mounts/per-alloc/{alloc}/{vid}/rw-file-system-single-node-writer"


def staging(node, vid=VOL):
    return f"/run/{node}/mounts/staging/{vid}/rw-file-system-single-node-writer"


class History:
    """A run directory in the making: the files the harness writes, built call by call."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="chaos-checker-test-")
        self.ops, self.events, self.calls, self.tasks, self.faults = [], [], {}, {}, []
        self.run = {"t0": 0, "healed": 1000 * S, "drain": 2000 * S}
        self.final = {"claims": [], "publications": [], "mounts": [], "tasks": [], "plugins": {},
                      "volumes_read": True, "external_read": True,
                      "after_teardown": {"processes": [], "mounts": [], "namespaces": []}}
        self.index = 0
        self.op(0, 1, "volume.create", VOL, "ok", mode="single-node-writer", ext=EXT)

    def op(self, invoke, complete, kind, obj, outcome="ok", status=200, **fields):
        self.ops.append({"id": len(self.ops) + 1, "kind": kind, "obj": obj, "cp": "cp0", "invoke": invoke * S,
                         "complete": complete * S, "status": status, "outcome": outcome, **fields})

    def event(self, t, typ, alloc, node, vid=VOL):
        self.index += 1
        key = "alloc_id" if typ in ("ClaimTaken", "ClaimPublished", "ClaimDropped") else "allocation_id"
        self.events.append({"Index": self.index, "Topic": "Claim", "Type": typ, "Key": vid, "MonotonicNs": t * S,
                            "Details": {key: alloc, "node_id": node}})

    def call(self, node, rpc, start, end, path="", code="OK", volume_id=EXT, csi_node=None):
        self.calls.setdefault(node, []).append({
            "rpc": rpc, "volume_id": volume_id, "node_id": csi_node or "", "path": path, "code_name": code,
            "start_mono_ns": start * S, "end_mono_ns": end * S, "pid": 1})

    def task(self, alloc, node, start, end, mode="write", vid=VOL, mounted=True):
        recs = [{"ev": "start", "t": start * S, "alloc": alloc, "name": alloc, "node": node, "mode": mode,
                 "path": target(node, alloc, vid)}]
        t = start
        while t < end:
            t += 0.25
            recs.append({"ev": "beat", "t": int(t * S), "mounted": mounted})
        recs.append({"ev": "exit", "t": end * S})
        self.tasks[alloc] = recs

    def lifecycle(self, alloc, node, t, hold=10, mode="write"):
        """A claim done right: intent, publish, stage, mount, the task, and the release in order."""
        csi = f"csi-{node}"
        self.event(t, "ClaimTaken", alloc, node)
        self.call("node0", "ControllerPublishVolume", t + 0.1, t + 0.2, csi_node=csi)
        self.call(node, "NodeStageVolume", t + 0.3, t + 0.4, path=staging(node))
        self.call(node, "NodePublishVolume", t + 0.5, t + 0.6, path=target(node, alloc))
        self.task(alloc, node, t + 1, t + hold, mode=mode)
        self.call(node, "NodeUnpublishVolume", t + hold + 0.5, t + hold + 0.6, path=target(node, alloc))
        self.call(node, "NodeUnstageVolume", t + hold + 0.7, t + hold + 0.8, path=staging(node))
        self.event(t + hold + 0.9, "ClaimNodeDetached", alloc, node)
        self.call("node1", "ControllerUnpublishVolume", t + hold + 1.0, t + hold + 1.1, csi_node=csi)
        self.event(t + hold + 1.2, "ClaimReleased", alloc, node)

    def claimed_and_mounted(self, alloc, node, t):
        """A claim's first half on node0's plugin: intent, publish, stage, mount (no task, no release)."""
        self.event(t, "ClaimTaken", alloc, node)
        self.call(node, "ControllerPublishVolume", t + 0.1, t + 0.2, csi_node=f"csi-{node}")
        self.call(node, "NodeStageVolume", t + 0.3, t + 0.4, path=staging(node))
        self.call(node, "NodePublishVolume", t + 0.5, t + 0.6, path=target(node, alloc))

    def write(self):
        def jsonl(path, recs):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                for r in recs:
                    f.write(json.dumps(r) + "\n")
        jsonl(os.path.join(self.dir, "ops.jsonl"), self.ops)
        jsonl(os.path.join(self.dir, "events.jsonl"), self.events)
        jsonl(os.path.join(self.dir, "faults.jsonl"), self.faults)
        for node, calls in self.calls.items():
            jsonl(os.path.join(self.dir, "calls", f"{node}.jsonl"), calls)
        for alloc, recs in self.tasks.items():
            jsonl(os.path.join(self.dir, "tasks", f"{alloc}.jsonl"), recs)
        for name, doc in (("run.json", self.run), ("final.json", self.final)):
            with open(os.path.join(self.dir, name), "w") as f:
                json.dump(doc, f)
        return self.dir

    def check(self):
        return checker.check(self.write())

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.h = History()

    def tearDown(self):
        self.h.cleanup()

    def violations(self, prop=None):
        report = self.h.check()
        return [v for v in report["violations"] if prop is None or v["property"] == prop]

    def test_a_clean_history_has_no_violation(self):
        self.h.lifecycle("a1", "node0", 10)
        self.h.lifecycle("a2", "node1", 30)
        self.h.op(2, 3, "volume.read", VOL, value="present")
        self.assertEqual(self.violations(), [])

    def test_two_writers_overlapping_on_a_single_writer_volume(self):
        self.h.lifecycle("a1", "node0", 10, hold=10)
        self.h.lifecycle("a2", "node0", 15, hold=10)
        v = self.violations("single-writer")
        self.assertEqual(len(v), 1)
        self.assertIn("a1", v[0]["message"])
        self.assertIn("a2", v[0]["message"])
        self.assertEqual({e["task"] for e in v[0]["evidence"]}, {"a1", "a2"})

    def test_readers_may_overlap_and_so_may_writers_one_after_the_other(self):
        self.h.lifecycle("a1", "node0", 10, hold=5, mode="read")
        self.h.lifecycle("a2", "node0", 12, hold=5, mode="read")
        self.h.lifecycle("a3", "node0", 40, hold=5)
        self.h.lifecycle("a4", "node0", 60, hold=5)
        self.assertEqual(self.violations("single-writer"), [])

    def test_a_task_running_before_its_node_publish_completed(self):
        self.h.lifecycle("a1", "node0", 10)
        self.h.tasks["a1"][0]["t"] = int(10.55 * S)  # started while NodePublish (10.5..10.6) ran
        v = self.violations("published-while-running")
        self.assertEqual(len(v), 1)
        self.assertEqual(v[0]["evidence"][0]["task"], "a1")
        self.assertTrue(any(e.get("rpc") == "NodePublishVolume" for e in v[0]["evidence"][1:]))

    def test_a_task_still_running_when_its_node_unpublish_began(self):
        self.h.lifecycle("a1", "node0", 10, hold=10)
        self.h.call("node0", "NodeUnpublishVolume", 15, 15.1, path=target("node0", "a1"), code="UNAVAILABLE")
        self.assertEqual(len(self.violations("published-while-running")), 1)

    def test_a_task_that_saw_its_volume_unmounted(self):
        self.h.lifecycle("a1", "node0", 10)
        self.h.tasks["a1"][3]["mounted"] = False
        v = self.violations("published-while-running")
        self.assertEqual(len(v), 1)
        self.assertIn("not mounted", v[0]["message"])

    def test_a_task_running_after_another_claims_controller_unpublish_took_its_node(self):
        # a1 reads on node0 and leaves; its ControllerUnpublish is under way when a2 claims on
        # node0 and publishes (the node's publication again); the unpublish lands while a2 runs.
        h = self.h
        h.lifecycle("a1", "node0", 10, hold=5, mode="read")
        h.calls["node1"][-1].update(start_mono_ns=int(15.9 * S), end_mono_ns=22 * S)  # a1's, slow
        h.events[-1]["MonotonicNs"] = int(22.1 * S)
        h.event(16, "ClaimTaken", "a2", "node0")
        h.call("node0", "ControllerPublishVolume", 16.1, 16.2, csi_node="csi-node0")
        h.call("node0", "NodeStageVolume", 16.3, 16.4, path=staging("node0"))
        h.call("node0", "NodePublishVolume", 16.5, 16.6, path=target("node0", "a2"))
        h.task("a2", "node0", 17, 25, mode="read")
        v = self.violations("published-while-running")
        self.assertEqual(len(v), 1)
        self.assertIn("not ControllerPublished to csi-node0", v[0]["message"])
        self.assertEqual(v[0]["evidence"][0]["task"], "a2")
        self.assertEqual(v[0]["evidence"][-1]["rpc"], "ControllerUnpublishVolume")
        # Published after the unpublish (the claim waited for it): nothing to report.
        h.calls["node0"][-3].update(start_mono_ns=int(22.2 * S), end_mono_ns=int(22.3 * S))
        h.calls["node0"][-2].update(start_mono_ns=int(22.4 * S), end_mono_ns=int(22.5 * S))
        h.calls["node0"][-1].update(start_mono_ns=int(22.6 * S), end_mono_ns=int(22.7 * S))
        h.task("a2", "node0", 23, 25, mode="read")
        self.assertEqual(self.violations("published-while-running"), [])

    def test_a_claim_freed_before_its_controller_unpublish_completed(self):
        self.h.lifecycle("a1", "node0", 10, hold=10)
        released = self.h.events[-1]
        released["MonotonicNs"] = int(21.05 * S)  # ControllerUnpublish ran 21.0 .. 21.1
        v = self.violations("release-order")
        self.assertEqual(len(v), 1)
        self.assertIn("ControllerUnpublishVolume", v[0]["message"])
        self.assertEqual(v[0]["evidence"][0]["type"], "ClaimReleased")

    def test_a_claim_freed_before_its_node_unpublish(self):
        self.h.lifecycle("a1", "node0", 10, hold=10)
        self.h.events[-1]["MonotonicNs"] = int(20.55 * S)  # NodeUnpublish ended at 20.6
        v = self.violations("release-order")
        self.assertEqual(len(v), 1)
        self.assertIn("NodeUnpublishVolume", v[0]["message"])
        self.assertIn("NodeUnstageVolume", v[0]["message"])

    def test_the_node_and_controller_steps_wait_for_the_last_claim_on_the_node(self):
        # a1 and a2 read the volume on node0; a1 leaves first: only its target is unpublished.
        h = self.h
        h.claimed_and_mounted("a1", "node0", 10)
        h.event(11, "ClaimTaken", "a2", "node0")
        h.call("node0", "NodePublishVolume", 11.5, 11.6, path=target("node0", "a2"))
        h.call("node0", "NodeUnpublishVolume", 20, 20.1, path=target("node0", "a1"))
        h.event(20.2, "ClaimReleased", "a1", "node0")
        self.assertEqual(self.violations("release-order"), [])

    def test_the_last_claim_on_a_node_dropped_while_the_volume_is_still_published_there(self):
        # a1 published node0; a2 (node0) claims; a1's release leaves the controller step to a2;
        # a2's publish fails for certain and it is dropped: nobody unpublishes node0.
        h = self.h
        h.claimed_and_mounted("a1", "node0", 10)
        h.event(20, "ClaimTaken", "a2", "node0")
        h.call("node0", "NodeUnpublishVolume", 20.1, 20.2, path=target("node0", "a1"))
        h.call("node0", "NodeUnstageVolume", 20.3, 20.4, path=staging("node0"))
        h.call("node0", "ControllerPublishVolume", 20.5, 20.6, csi_node="csi-node0", code="ALREADY_EXISTS")
        h.event(20.7, "ClaimReleased", "a1", "node0")
        h.event(20.8, "ClaimDropped", "a2", "node0")
        v = self.violations("release-order")
        self.assertEqual(len(v), 1)
        self.assertIn("dropped", v[0]["message"])
        self.assertIn("ControllerUnpublishVolume", v[0]["message"])
        h.call("node1", "ControllerUnpublishVolume", 20.65, 20.68, csi_node="csi-node0")  # a1's release did it
        self.assertEqual(self.violations("release-order"), [])

    def test_a_controller_publish_before_any_claim_was_recorded(self):
        self.h.lifecycle("a1", "node0", 10)
        self.h.events[0]["MonotonicNs"] = int(10.15 * S)  # the intent committed while ControllerPublish ran
        v = self.violations("intent-before-publish")
        self.assertEqual(len(v), 1)
        self.assertEqual(v[0]["evidence"][0]["rpc"], "ControllerPublishVolume")
        self.assertEqual(v[0]["evidence"][1]["type"], "ClaimTaken")

    def test_reads_must_be_linearizable(self):
        self.h.op(5, 6, "volume.read", VOL, value="absent")  # after the acknowledged create
        v = self.violations("linearizable")
        self.assertEqual(len(v), 1)
        self.assertIn("vol1", v[0]["message"])

    def test_a_stale_read_is_counted_not_checked(self):
        self.h.op(5, 6, "volume.read", VOL, value="absent", stale=True)
        report = self.h.check()
        self.assertEqual(report["violations"], [])
        self.assertEqual(report["figures"]["linearizability"]["stale_reads"], 1)

    def test_an_in_doubt_write_may_or_may_not_have_happened(self):
        self.h.op(10, 20, "volume.delete", VOL, outcome="info", status=0)
        self.h.op(21, 22, "volume.read", VOL, value="present")
        self.h.op(23, 24, "volume.read", VOL, value="absent")
        self.assertEqual(self.violations(), [])
        self.h.op(25, 26, "volume.read", VOL, value="present")  # it cannot come back
        self.assertEqual(len(self.violations("linearizable")), 1)

    def test_an_acknowledged_write_lost_on_the_healed_cluster(self):
        self.h.op(10, 11, "alloc.submit", "alloc1", value="id-1")
        self.h.op(12, 13, "alloc.read", "alloc1", value="run", alloc_id="id-1")
        self.h.op(2100, 2101, "alloc.read", "alloc1", value="absent", alloc_id="id-1")  # after the drain began
        v = self.violations("durable")
        self.assertEqual(len(v), 1)
        self.assertIn("alloc1", v[0]["message"])

    def test_an_allocation_stopped_by_node_loss_is_not_a_violation(self):
        self.h.op(10, 11, "alloc.submit", "alloc1", value="id-1")
        self.h.op(50, 51, "alloc.read", "alloc1", value="stop", alloc_id="id-1")
        self.assertEqual(self.violations(), [])
        self.h.op(60, 61, "alloc.read", "alloc1", value="run", alloc_id="id-1")  # never back to run
        self.assertEqual(len(self.violations("linearizable")), 1)

    def test_anything_left_after_the_drain(self):
        self.h.final["claims"] = [{"volume": VOL, "AllocationID": "a1", "NodeID": "node0", "State": "node-detached",
                                   "LastError": "controller unreachable"}]
        self.h.final["mounts"] = ["/run/node0/mounts/staging/vol1/x"]
        self.h.final["plugins"] = {"node0": [10, 11]}
        self.h.final["after_teardown"]["namespaces"] = ["mchaos1-hub"]
        v = self.violations("nothing-left")
        self.assertEqual(len(v), 4)
        self.assertIn("controller unreachable", v[0]["message"])

    def test_a_stop_after_the_heal_must_free_within_ten_seconds(self):
        self.h.event(1001, "ClaimTaken", "id-1", "node0")
        self.h.op(1010, 1011, "alloc.stop", "alloc1", alloc_id="id-1")
        self.h.event(1025, "ClaimReleased", "id-1", "node0")
        v = self.violations("liveness")
        self.assertEqual(len(v), 1)
        self.assertIn("14.0s", v[0]["message"])
        self.h.events[-1]["MonotonicNs"] = 1015 * S
        self.assertEqual(self.violations("liveness"), [])

    def test_a_submit_after_the_heal_that_neither_ran_nor_was_refused(self):
        self.h.op(1010, 1011, "alloc.submit", "alloc1", value="id-1")
        self.h.op(2100, 2101, "alloc.read", "alloc1", value="run", alloc_id="id-1", client_status="pending",
                  last_event="")
        self.assertEqual(len(self.violations("liveness")), 1)
        self.h.ops[-1].update(client_status="failed", last_event="volume vol1 is claimed for writing by a2")
        self.assertEqual(self.violations("liveness"), [])
        self.h.ops[-1].update(client_status="complete", last_event="stopped before the task started")
        self.assertEqual(len(self.violations("liveness")), 1)
        self.h.op(1015, 1016, "drain.stop", "alloc1", alloc_id="id-1")  # stopped before it was due: no verdict
        self.assertEqual(self.violations("liveness"), [])

    def test_duplicate_controller_calls_and_heal_to_settled(self):
        self.h.lifecycle("a1", "node0", 10)
        self.h.call("node2", "ControllerPublishVolume", 10.25, 10.3, csi_node="csi-node0")  # published already
        self.h.call("node2", "ControllerUnpublishVolume", 21.2, 21.3, csi_node="csi-node0")  # unpublished already
        self.h.faults = [{"ev": "heal", "t": 20 * S, "n": 0, "kind": "kill", "target": "cp0"}]
        f = self.h.check()["figures"]
        self.assertEqual(f["duplicate_controller_calls"], 2)
        self.assertEqual(f["duplicates_per_1000_claims"], 2000.0)
        self.assertEqual(f["heal_to_settled_s"]["heals_with_pending_releases"], 0)  # nothing releasing at 20 s
        self.h.faults[0]["t"] = int(21.0 * S)  # node-detached at 20.9, freed at 21.2
        s = self.h.check()["figures"]["heal_to_settled_s"]
        self.assertAlmostEqual(s["p50"], 0.2, places=3)


class FaultScheduleTest(unittest.TestCase):
    def test_a_seed_replays_the_same_schedule(self):
        self.assertEqual(faults.schedule(42, 600), faults.schedule(42, 600))
        self.assertNotEqual(faults.schedule(42, 600), faults.schedule(43, 600))

    def test_a_long_schedule_has_every_kind_and_ends_within_the_run(self):
        plan = faults.schedule(1, 1800)
        self.assertEqual({f["kind"] for f in plan}, {k for k, _ in faults.KINDS})
        self.assertTrue(all(f["at"] + f["length"] <= 1800 for f in plan))
        self.assertTrue(any(f["kind"] == "pause" and f["length"] > 10 for f in plan), "pauses beyond the heartbeat TTL")
        self.assertTrue(any(f["target"] == "etcd-leader" for f in plan))
        self.assertTrue(any(f["kind"] == "kill" and f["target"] == "cp-leader" for f in plan))
        self.assertTrue(any(f["kind"] == "partition-agent" and f["length"] > 25 for f in plan), "a node lost")


class LinearizabilityTest(unittest.TestCase):
    def w(self, i, c, v, definite=True):
        return {"invoke": i, "complete": c, "f": "write", "value": v, "definite": definite}

    def r(self, i, c, v):
        return {"invoke": i, "complete": c, "f": "read", "value": v, "definite": True}

    def test_concurrent_ops_may_go_either_way(self):
        ok, _ = linearizability.check([self.w(0, 10, "a"), self.r(1, 2, "a"), self.r(3, 4, "x")], "x")
        self.assertFalse(ok)  # once a read saw "a", a later read cannot see the old value
        ok, _ = linearizability.check([self.w(0, 10, "a"), self.r(1, 2, "x"), self.r(3, 4, "a")], "x")
        self.assertTrue(ok)

    def test_a_long_sequential_history_is_decided(self):
        ops = [self.w(10 * i, 10 * i + 1, f"v{i}") for i in range(200)]
        ops += [self.r(10 * i + 5, 10 * i + 6, f"v{i}") for i in range(200)]
        self.assertTrue(linearizability.check(ops, "x")[0])
        ops.append(self.r(5000, 5001, "v3"))
        self.assertFalse(linearizability.check(ops, "x")[0])


if __name__ == "__main__":
    unittest.main()
