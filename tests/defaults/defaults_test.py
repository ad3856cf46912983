#!/usr/bin/env python3
"""The shipped defaults survive a crash (issue 40). The stack exactly as `make run` starts it (the
command lines of scripts/run-local.sh through scripts/lib/local-stack.sh: default ports 4700-4703,
metrics on, mutual TLS, HTTPS, ACLs, the hostpath plugin launched by the agent), with an
allocation running. Each service in turn is killed with SIGKILL (agent, plugin, control plane) and
started again with the same command line (the plugin by its agent); after each:
  - the agent is back within 2 s of its restart (running, registered, serving metrics on 4703:
    an orphaned plugin used to hold that port and the restarted agent exited). The 2 s count from
    the moment the binary is ready to run: what `mooring-nodeagent --help` takes just before (an
    ASan binary on two cores shared with a build can need seconds only to start) is added to the
    limit, and both are printed;
  - there is exactly one plugin process;
  - the running allocation is still running (re-adopted), and a lifecycle completes:
    submit -> running -> stop -> claim freed.
Before that, two starts that must not leave a half-started agent: one whose gRPC port (4702) is
taken exits 1 naming the address and launches no plugin (it used to log and run on, uncallable);
one sent SIGTERM as soon as it logs "starting" shuts down with exit 0 (the default action of
SIGTERM used to kill it before its handler existed).
Exit 77 (skipped, with the reason) when not root or when a default port is taken (a `make run`
of your own, say); ctest never runs it beside another test on the default ports (RESOURCE_LOCK).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from local_stack import LocalStack  # noqa: E402
from processes import kill_left, port_free, unmount_left  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release")
DEFAULT_PORTS = (4700, 4701, 4702, 4703)
AGENT_BACK_WITHIN = 2.0
# The defaults, unset: whatever the caller's environment says, this is the stack `make run` starts.
ADDRESS_VARIABLES = ("MOORING_HTTP_ADDR", "MOORING_CP_GRPC_ADDR", "MOORING_AGENT_GRPC_ADDR",
                     "MOORING_AGENT_METRICS_ADDR", "MOORING_INSECURE", "MOORING_METRICS")


def metrics_answer():
    try:
        with urllib.request.urlopen("http://127.0.0.1:4703/metrics", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def bare_start(stack):
    """Seconds the agent's binary takes to start and exit (--help) on this machine right now."""
    started = time.time()
    subprocess.run([stack.commands["agent"][0], "--help"], stdout=subprocess.DEVNULL, check=True)
    return time.time() - started


def agent_back(stack, since, restarted, limit):
    """Waits (at most `limit` s after `restarted`) until the agent runs, has registered again and
    serves metrics; how long it took."""
    def back():
        log = stack.log("agent", since)
        return stack.running("agent") and "registered with the control plane" in log and metrics_answer()
    while time.time() - restarted < limit and not back():
        time.sleep(0.02)
    took = time.time() - restarted
    if not back():
        raise RuntimeError(f"the agent was not back {limit:.2f} s after its restart (running: "
                           f"{stack.running('agent')}); its log since:\n{stack.log('agent', since)[-3000:]}")
    return took


def exactly_one_plugin(stack, what):
    stack.wait(f"{what}: exactly one plugin process (have {stack.plugin_pids()})",
               lambda: len(stack.plugin_pids()) == 1 and stack.plugin_healthy(), 60)
    time.sleep(1)  # and it stays one: no second launch behind it
    pids = stack.plugin_pids()
    if len(pids) != 1:
        raise RuntimeError(f"{what}: {len(pids)} plugin processes: {pids}")
    return pids[0]


def refused_start_on_taken_grpc_port(stack):
    since = stack.log_size("agent")
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", 4702))
    holder.listen(1)
    try:
        p = stack.start("agent")
        try:
            code = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise RuntimeError("an agent whose gRPC port 4702 is taken is still running after 60 s")
    finally:
        holder.close()
    log = stack.log("agent", since)
    if code != 1 or "cannot listen on 127.0.0.1:4702" not in log:
        raise RuntimeError(f"an agent whose gRPC port is taken: exit {code}, log:\n{log[-2000:]}")
    if stack.plugin_pids():
        raise RuntimeError(f"an agent that refused to start launched plugins: {stack.plugin_pids()}")
    print("gRPC port 4702 taken: the agent exits 1 naming it, no plugin launched")


def sigterm_while_starting(stack):
    since = stack.log_size("agent")
    p = stack.start("agent")
    stack.wait("the agent's first log line", lambda: "starting mooring-nodeagent" in stack.log("agent", since), 60)
    p.terminate()
    wrong = stack.stop("agent", 40)
    if wrong:
        raise RuntimeError(f"an agent sent SIGTERM while starting {wrong}; log:\n{stack.log('agent', since)[-2000:]}")
    stack.wait("no plugin left by the agent stopped while starting", lambda: not stack.plugin_pids(), 20)
    print("SIGTERM while starting: the agent shuts down with exit 0, no plugin left")


def crash_and_restart(stack, victim, keeper, round_no):
    if victim == "plugin":
        old = stack.plugin_pids()
        os.kill(old[0], signal.SIGKILL)
        stack.wait("the agent relaunching its plugin", lambda: stack.plugin_pids() not in ([], old), 60)
        print(f"kill -9 plugin {old[0]}: relaunched by the agent as {stack.plugin_pids()}")
    else:
        startup = bare_start(stack) if victim == "agent" else 0
        since = stack.log_size(victim)
        stack.kill9(victim)
        restarted = time.time()
        stack.start(victim)
        if victim == "agent":
            took = agent_back(stack, since, restarted, AGENT_BACK_WITHIN + startup)
            print(f"kill -9 agent: back (registered, metrics on 4703) {took:.2f} s after its restart "
                  f"(limit {AGENT_BACK_WITHIN} s + {startup:.2f} s the bare binary takes to start here)")
        else:
            stack.wait("the control plane's API after its restart", stack.healthy)
            print(f"kill -9 control plane: serving again {time.time() - restarted:.2f} s after its restart")
    pid = exactly_one_plugin(stack, f"after kill -9 of the {victim}")
    stack.wait(f"after kill -9 of the {victim}: the allocation still running",
               lambda: stack.alloc_status(keeper) == "running")
    running, freed = stack.lifecycle(f"after-{victim}-{round_no}")
    print(f"  one plugin (pid {pid}); lifecycle: running after {running:.2f} s, claim freed {freed:.2f} s after stop")


def main():
    if os.geteuid() != 0:
        print("SKIP: the defaults suite needs root (the hostpath plugin bind-mounts volumes)")
        return 77
    taken = [p for p in DEFAULT_PORTS if not port_free(p)]
    if taken:
        print(f"SKIP: default port(s) {taken} taken on 127.0.0.1 (a `make run` of your own?); "
              "the defaults suite needs 4700-4703 free")
        return 77
    data = tempfile.mkdtemp(prefix="mooring-defaults-")
    env = {k: v for k, v in os.environ.items() if k not in ADDRESS_VARIABLES}
    stack = LocalStack(BUILD, data, env)
    ok = False
    try:
        stack.start("controlplane")
        stack.wait("the control plane's API", stack.healthy, 60)
        stack.bootstrap()
        refused_start_on_taken_grpc_port(stack)
        sigterm_while_starting(stack)
        stack.start("agent")
        stack.wait("a healthy hostpath plugin", stack.plugin_healthy, 60)
        if not metrics_answer():
            raise RuntimeError("the agent does not serve metrics on the default 127.0.0.1:4703")
        stack.create_volume("kept")
        keeper = stack.submit("kept", "kept", 'echo hi > "$MOORING_VOLUME_DATA/hi"; exec sleep 3600')
        stack.wait("the kept allocation running", lambda: stack.alloc_status(keeper) == "running")
        for round_no, victim in enumerate(("agent", "plugin", "controlplane", "agent")):
            crash_and_restart(stack, victim, keeper, round_no)
        status, answer = stack.call("POST", f"/v1/allocation/{keeper}/stop")
        if status != 200:
            raise RuntimeError(f"stop the kept allocation: {status} {answer}")
        stack.wait("the kept allocation's claim freed", lambda: stack.claims("kept") == 0)
        ok = True
    except Exception as e:  # noqa: BLE001 (reported with the logs)
        print(f"FAIL: {e}")
    finally:
        # As run-local stops it: the agent first (it drains), then the control plane.
        for name, timeout in (("agent", 40), ("controlplane", 20)):
            wrong = stack.stop(name, timeout)
            if wrong:
                ok = False
                print(f"FAIL: the {name} {wrong}")
        for pid, cmdline in kill_left(data):
            ok = False
            print(f"FAIL: left running after the stack stopped: pid {pid}: {cmdline}")
        left = unmount_left(data)
        if left:
            ok = False
            print("FAIL: still mounted after the stop:", left)
        if not ok:
            for name in ("controlplane", "agent"):
                print(f"---- {name}.log (tail) ----\n" + stack.log(name)[-5000:])
        shutil.rmtree(data, ignore_errors=True)
    print("defaults: OK" if ok else "defaults: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
