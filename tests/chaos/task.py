"""The chaos workload's task: it writes its own history, so the checker knows when it really ran.
Usage: task.py RECORD_DIR MODE LIFETIME_S [FAIL_AFTER_S]
  MODE write|read; LIFETIME_S 0: until stopped; FAIL_AFTER_S: exit 1 that long after the start
  (chaos.py --task-fails-after: tasks that fail at once, so releases follow claims closely)

One JSON line per record in RECORD_DIR/<alloc id>.jsonl, each with CLOCK_MONOTONIC in ns ("t"):
  start  first thing after the interpreter is up: alloc, name, node, volume path, mode, pid;
  beat   every 250 ms while it runs, with whether its volume path is a mount point (from the
         mount table: a bind mount of a directory on the same file system keeps st_dev);
  exit   on SIGTERM or at the end of its lifetime, just before it exits.
A writer appends a line to a file in its volume at every beat; a reader reads it. SIGKILL leaves
no exit record: the last beat is then the last moment it is known to have run."""
import json
import os
import signal
import sys
import time

BEAT = 0.25


def main():
    record_dir, mode, lifetime = sys.argv[1], sys.argv[2], float(sys.argv[3])
    fail_after = float(sys.argv[4]) if len(sys.argv) > 4 else None
    alloc = os.environ.get("MOORING_ALLOC_ID", "unknown")
    volume = os.environ.get("MOORING_VOLUME_DATA", "")
    out = os.open(os.path.join(record_dir, f"{alloc}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def record(ev, **fields):
        line = json.dumps({"ev": ev, "t": time.monotonic_ns(), **fields}) + "\n"
        os.write(out, line.encode())

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append("sigterm"))
    record("start", alloc=alloc, name=os.environ.get("MOORING_ALLOC_NAME", ""), node=os.environ.get("MOORING_NODE_ID", ""),
           path=volume, mode=mode, pid=os.getpid())
    end = time.monotonic() + lifetime if lifetime > 0 else None
    if fail_after is not None:
        end = min(end or float("inf"), time.monotonic() + fail_after)
    data = os.path.join(volume, "chaos-data")
    while not stopping:
        mounted = is_mount_point(volume)
        touched = touch(data, mode, alloc)
        record("beat", mounted=mounted, io=touched)
        if end is not None and time.monotonic() >= end:
            stopping.append("lifetime" if fail_after is None else "failed")
            break
        time.sleep(BEAT)
    record("exit", why=stopping[0])
    os.close(out)
    if stopping[0] == "failed":
        sys.exit(1)


def is_mount_point(path):
    want = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo") as f:
            return any(decode(line.split()[4]) == want for line in f)
    except OSError:
        return None


def decode(field):
    # mountinfo escapes spaces and the like as \\ooo.
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def touch(data, mode, alloc):
    try:
        if mode == "write":
            with open(data, "a") as f:
                f.write(f"{alloc} {time.monotonic_ns()}\n")
        elif os.path.exists(data):
            with open(data) as f:
                f.read(64)
        return "ok"
    except OSError as e:
        return e.strerror or "error"


if __name__ == "__main__":
    main()
