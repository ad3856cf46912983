#!/usr/bin/env python3
"""scripts/run-local.sh (`make run`) as a terminal user meets it (issue 40), on free ports:
  1. Ctrl-C: a real SIGINT to the script's whole process group, as a terminal sends it (the script
     and the tees copying the services' output). The shutdown is the clean one of SIGTERM: the
     agent drains, both services exit 0 (nothing dies of SIGPIPE), and their shutdown lines reach
     both the terminal and $MOORING_DATA/logs.
  2. MOORING_INSECURE=1, as the README spells it, starts the plaintext stack.
  3. A service that ends by itself is named with how it ended and its last log lines: the agent
     killed by SIGKILL, and an agent that cannot start (its metrics port taken) with its exit code.
Exit 77 (skipped) when not root.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from local_stack import LocalStack  # noqa: E402
from processes import eventually, free_port, kill_left, running_processes, start_group, stop_group, unmount_left  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release")
SCRIPT = os.path.join(ROOT, "scripts", "run-local.sh")


class RunLocal:
    """run-local.sh in a session of its own (its process group is what a terminal signals), its
    stdout and stderr (the terminal) in a file."""

    def __init__(self, name, **extra_env):
        self.data = tempfile.mkdtemp(prefix=f"mooring-run-local-{name}-")
        self.env = dict(os.environ, MOORING_BIN=BUILD, MOORING_DATA=self.data,
                        MOORING_HTTP_ADDR=f"127.0.0.1:{free_port()}",
                        MOORING_CP_GRPC_ADDR=f"127.0.0.1:{free_port()}",
                        MOORING_AGENT_GRPC_ADDR=f"127.0.0.1:{free_port()}",
                        MOORING_AGENT_METRICS_ADDR=f"127.0.0.1:{free_port()}")
        self.env.update(extra_env)
        self.terminal = os.path.join(self.data, "terminal.out")
        with open(self.terminal, "w") as out:
            self.proc = start_group([SCRIPT], cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)

    def output(self):
        with open(self.terminal, errors="replace") as f:
            return f.read()

    def log(self, name):
        path = os.path.join(self.data, "logs", f"{name}.log")
        return open(path, errors="replace").read() if os.path.exists(path) else ""

    def wait_running(self):
        if not eventually(lambda: "Mooring is running" in self.output() or self.proc.poll() is not None, 120):
            raise RuntimeError("the stack did not come up in 120 s")
        if self.proc.poll() is not None:
            raise RuntimeError(f"run-local.sh exited {self.proc.returncode} before the stack came up")

    def service_pid(self, binary):
        """The pid of the service running `binary` under this data dir."""
        for pid, args in running_processes():
            if args and args[0].endswith(binary.encode()) and any(self.data.encode() in a for a in args):
                return pid
        return 0

    def finish(self, failures):
        """Stops whatever is left, checks nothing stays mounted or running, prints the logs on failure."""
        if self.proc.poll() is None:
            stop_group(self.proc, signal.SIGTERM, 60)
        for pid, cmdline in kill_left(self.data):
            failures.append(f"left running after run-local.sh ended: pid {pid}: {cmdline}")
        left = unmount_left(self.data)
        if left:
            failures.append(f"still mounted: {left}")
        if failures:
            print("---- terminal ----\n" + self.output()[-6000:])
            for name in ("controlplane", "agent"):
                print(f"---- {name}.log (tail) ----\n" + self.log(name)[-3000:])
        shutil.rmtree(self.data, ignore_errors=True)


def expect(failures, condition, message):
    if not condition:
        failures.append(message)


def banner_commands_work(stack, failures):
    """The banner's paste line and its "Try:" commands, run as printed by a shell whose PATH has
    no mooring (issue 45: `mooring` was not on PATH) and whose environment names no stack."""
    out = stack.output()
    paste = re.search(r"For the CLI, paste:\n  (export .*)\n", out)
    tries = re.search(r"Try:\n((?:  mooring .*\n)+)", out)
    expect(failures, paste is not None and tries is not None, "the banner lacks the paste line or the Try: commands")
    if not (paste and tries):
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOORING_")}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    for command in tries.group(1).split("\n"):
        if not command.strip():
            continue
        done = subprocess.run(["bash", "-c", paste.group(1) + "\n" + command.strip()], env=env, cwd="/",
                              capture_output=True, text=True, timeout=120)
        expect(failures, done.returncode == 0 and done.stdout.endswith("\n"),
               f"{command.strip()} as the banner prints it: exit {done.returncode}\n{done.stdout}{done.stderr}")
    print("banner: the paste line and every Try: command work as printed")


def ctrl_c(stack, failures):
    """The banner's commands (a volume "data" and its writer), another allocation, then SIGINT to
    the process group: the clean shutdown, on record."""
    stack.wait_running()
    banner_commands_work(stack, failures)
    api = LocalStack(BUILD, stack.data, stack.env)  # the same stack: its API and token
    api.bootstrap()
    api.create_volume("ctrl-c")
    aid = api.submit("ctrl-c-writer", "ctrl-c", 'echo hi > "$MOORING_VOLUME_DATA/hi"; exec sleep 3600')
    api.wait("the allocation running", lambda: api.alloc_status(aid) == "running")
    os.killpg(stack.proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    try:
        code = stack.proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        code = None
    out = stack.output()
    expect(failures, code == 0, f"run-local.sh exited {code} after Ctrl-C (0 expected)")
    expect(failures, "the node agent stopped: it exited with code 0" in out, "the agent did not exit 0")
    expect(failures, "the control plane stopped: it exited with code 0" in out,
           "the control plane did not exit 0 (SIGPIPE, when its tee died first)")
    expect(failures, "SIGPIPE" not in out, "something died of SIGPIPE")
    # The shutdown's lines reach the log files and the terminal.
    for name, lines in (("agent", ("signal received; shutting down", "drained: every allocation stopped",
                                   "msg=\"stopped\"")),
                        ("controlplane", ("msg=\"shutting down\"", "msg=\"stopped\""))):
        for line in lines:
            expect(failures, line in stack.log(name), f"{name}.log lacks the shutdown line {line!r}")
            expect(failures, line in out, f"the terminal lacks the {name}'s shutdown line {line!r}")
    print(f"Ctrl-C: exit {code}; both services exited 0; shutdown lines in the terminal and the logs")


def insecure_and_a_killed_agent(stack, failures):
    """MOORING_INSECURE=1 starts the plaintext stack; kill -9 of its agent is named, with its log."""
    stack.wait_running()
    expect(failures, f"http://{stack.env['MOORING_HTTP_ADDR']}" in stack.output(), "the API is not plain HTTP")
    agent = stack.service_pid("mooring-nodeagent")
    expect(failures, agent != 0, "no agent process")
    os.kill(agent, signal.SIGKILL)
    code = stack.proc.wait(timeout=60)
    out = stack.output()
    expect(failures, code == 1, f"run-local.sh exited {code} when the agent died (1 expected)")
    m = re.search(r"run-local: the node agent was killed by signal 9 \(SIGKILL\); its last lines \((.*)\):\n"
                  r"((?: {4}.*\n)+)", out)
    expect(failures, m is not None, "run-local did not name the agent's end (signal 9) with its last lines")
    if m:
        expect(failures, m.group(1) == os.path.join(stack.data, "logs", "agent.log"), f"log named {m.group(1)}")
        last = stack.log("agent").splitlines()[-1]
        expect(failures, m.group(2).rstrip("\n").endswith(last), "the quoted lines are not the log's last")
    expect(failures, "the control plane stopped: it exited with code 0" in out, "the control plane did not stop cleanly")
    # The plugin the dead agent left running is stopped too (finish() checks none is left).
    expect(failures, re.search(r"run-local: stopping plugin process \d+, left running by the agent", out) is not None,
           "the orphaned plugin was not stopped")
    print("MOORING_INSECURE=1: up on plain HTTP; the agent's kill -9 named with its last log lines")


def agent_that_cannot_start(stack, failures, taken_port):
    """The agent's metrics port is taken (as the orphaned plugin held it in issue 40): run-local
    names the agent's exit code and quotes the line that says why."""
    code = stack.proc.wait(timeout=120)
    out = stack.output()
    expect(failures, code == 1, f"run-local.sh exited {code} (1 expected)")
    m = re.search(r"run-local: the node agent exited with code (\d+); its last lines \(.*\):\n((?: {4}.*\n)+)", out)
    expect(failures, m is not None and m.group(1) != "0", "run-local did not name the agent's exit code")
    if m:
        expect(failures, str(taken_port) in m.group(2), f"the quoted lines do not name the taken address:\n{m.group(2)}")
    print(f"agent that cannot start: named with its exit code {m.group(1) if m else '?'} and why")


def run(name, body, **env):
    """One run-local.sh with `env`, `body(stack, failures)` against it, then the clean-up checks."""
    started = time.time()
    failures = []
    stack = RunLocal(name, **env)
    try:
        body(stack, failures)
    except Exception as e:  # noqa: BLE001 (reported with the logs)
        failures.append(str(e))
    stack.finish(failures)
    for f in failures:
        print(f"FAIL: {name}: {f}")
    print(f"{name}: {'OK' if not failures else 'FAILED'} ({time.time() - started:.0f} s)")
    return failures


def main():
    if os.geteuid() != 0:
        print("SKIP: the local stack needs root (the hostpath plugin bind-mounts volumes)")
        return 77
    failures = run("ctrl-c", ctrl_c)
    failures += run("insecure", insecure_and_a_killed_agent, MOORING_INSECURE="1")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        failures += run("port-taken", lambda stack, found: agent_that_cannot_start(stack, found, port),
                        MOORING_AGENT_METRICS_ADDR=f"127.0.0.1:{port}")
    print("run-local: OK" if not failures else "run-local: FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
