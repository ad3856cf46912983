#!/usr/bin/env python3
"""The README walkthrough, run the way a reader runs it.

Starts the local stack exactly as `make run` does (scripts/run-local.sh, on free ports and a
temporary data dir, with the binaries of this build), then runs every command of the README's
walkthrough block in order from the repository root. A command annotated `# expect: REGEX` is
re-run (for up to 60 s) until its output matches. Finally Ctrl-C (SIGINT) the stack and check it
stops gracefully with nothing left mounted. Exit 77 (skipped) when not root: the stack mounts.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from processes import free_port, mounts_under, start_group, stop_group  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release")


def walkthrough_commands():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    m = re.search(r"<!-- walkthrough:begin -->\s*```sh\n(.*?)```\s*<!-- walkthrough:end -->", text, re.S)
    if not m:
        sys.exit("README.md has no walkthrough block (<!-- walkthrough:begin --> ... <!-- walkthrough:end -->)")
    commands = []
    for line in m.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        expect = None
        em = re.search(r"#\s*expect:\s*(.+)$", line)
        if em:
            expect = em.group(1).strip()
        commands.append((line, expect))
    return commands


def main():
    if os.geteuid() != 0:
        print("SKIP: the walkthrough needs root (the hostpath plugin bind-mounts volumes)")
        return 77
    data = tempfile.mkdtemp(prefix="mooring-walkthrough-")
    http = f"127.0.0.1:{free_port()}"
    env = dict(os.environ,
               MOORING_BIN=BUILD, MOORING_DATA=data, MOORING_HTTP_ADDR=http,
               MOORING_CP_GRPC_ADDR=f"127.0.0.1:{free_port()}",
               MOORING_AGENT_GRPC_ADDR=f"127.0.0.1:{free_port()}",
               MOORING_AGENT_METRICS_ADDR=f"127.0.0.1:{free_port()}",
               MOORING_ADDR=f"https://{http}",
               MOORING_CACERT=os.path.join(data, "tls", "ca.pem"))
    log = open(os.path.join(data, "run-local.out"), "w+")
    stack = start_group([os.path.join(ROOT, "scripts", "run-local.sh")], cwd=ROOT, env=env,
                        stdout=log, stderr=subprocess.STDOUT)
    ok = False
    try:
        deadline = time.time() + 120
        while "Mooring is running" not in open(log.name).read():
            if stack.poll() is not None or time.time() > deadline:
                raise RuntimeError("the stack did not come up:\n" + open(log.name).read()[-4000:])
            time.sleep(0.2)
        # The management token `make run` bootstrapped, as the README's export line reads it.
        env["MOORING_TOKEN"] = open(os.path.join(data, "bootstrap-token")).read().strip()
        # The README's commands use the CLI of a Release build and ./.mooring; point them here.
        env["PATH"] = os.path.join(BUILD, "cli") + os.pathsep + env["PATH"]
        for command, expect in walkthrough_commands():
            command = command.replace("build/release", BUILD).replace(".mooring/", data + "/")
            deadline = time.time() + 60
            while True:
                r = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True)
                out = r.stdout + r.stderr
                good = r.returncode == 0 and (expect is None or re.search(expect, out))
                if good:
                    print(f"$ {command}\n{out}", end="" if out.endswith("\n") or not out else "\n")
                    break
                if expect is None or time.time() > deadline:
                    raise RuntimeError(f"walkthrough step failed: {command}\nexit {r.returncode}, "
                                       f"expected /{expect}/, got:\n{out}")
                time.sleep(0.5)
        # `make run` a second time while the first runs: refused with a clear message, and the
        # first stack goes on untouched (its API, its plugin, its node).
        second = subprocess.run([os.path.join(ROOT, "scripts", "run-local.sh")], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60, start_new_session=True)
        said = second.stdout + second.stderr
        if second.returncode == 0 or "already" not in said:
            raise RuntimeError(f"a second run-local.sh was not refused (exit {second.returncode}):\n{said}")
        print(f"second run-local.sh refused: {said.strip().splitlines()[0]}")
        if stack.poll() is not None:
            raise RuntimeError("the first stack stopped when a second one was started")
        r = subprocess.run(["mooring", "plugin", "status", "hostpath"], cwd=ROOT, env=env, capture_output=True,
                           text=True)
        if r.returncode != 0 or not re.search(r"Nodes Healthy\s+= 1/1", r.stdout):
            raise RuntimeError("the first stack is not healthy after the second start:\n" + r.stdout + r.stderr)
        ok = True
    finally:
        # Ctrl-C, as a reader ends `make run`.
        if not stop_group(stack, signal.SIGINT, 60):
            ok = False
            print("FAIL: the stack did not stop within 60 s of Ctrl-C")
        left = mounts_under(data)
        out = open(log.name).read()
        if left:
            ok = False
            print("FAIL: still mounted after Ctrl-C:", left)
            for m in sorted(left, key=len, reverse=True):
                subprocess.run(["umount", "-l", m])
        if stack.returncode != 0:
            ok = False
            print(f"FAIL: run-local.sh exited {stack.returncode} after Ctrl-C")
        if not ok:
            print("---- run-local output (tail) ----\n" + out[-6000:])
            for name in ("controlplane.log", "agent.log"):
                p = os.path.join(data, "logs", name)
                if os.path.exists(p):
                    print(f"---- {name} (tail) ----\n" + open(p).read()[-4000:])
        shutil.rmtree(data, ignore_errors=True)
    print("walkthrough: OK" if ok else "walkthrough: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
