#!/usr/bin/env python3
"""`make compose-test`: docker/compose.yaml run for real under dockerd, as docker/README.md says.

Phases, each with its wall time printed:
  dockerd      start one (niced) if none answers; stopped again at the end if this test started it
  base images  debian:bookworm(-slim) if present or pullable, else made from Debian's packages
               (tests/compose/base-images.sh) and passed as MOORING_BASE_IMAGE/_RUNTIME_BASE_IMAGE
  default      docker/README.md's compose walkthrough block, line by line (`# expect: REGEX` lines
               polled until they hold): host setup, build, up, the CA, token and CLI fetched as
               the README says, volume create, a writer and a reader through the containers
  agent kill   kill -9 of agent-1's container init while a writer holds a volume on node-1: the
               restart policy brings it back, the dead task's claim is freed, a new lifecycle
               (claim, write, stop, free) completes on node-1
  down         the README's `down` with the reader still running: no container and no mount left;
               `down -v`: no volume (named or anonymous) and no network left
  ha           the README's HA block, then kill -9 of the leader's container: a write through a
               standby within the failover, the killed member back as a standby, the claim freed;
               `--profile ha down -v` and the same nothing-left checks
The stack runs under its own project name with free published ports and a temporary data dir, so
it touches neither a user's compose stack nor `make run`. Exit 0 when every check passed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import free_port  # noqa: E402  (below the ephemeral range, never twice)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROJECT = "mooring-compose-test"
README = os.path.join(REPO, "docker", "README.md")
COMPOSE_FILE = os.path.join(REPO, "docker", "compose.yaml")
times = []  # (phase, seconds)


class Failure(Exception):
    pass


def log(msg):
    print(f"compose-test: {msg}", flush=True)


class Phase:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        log(f"--- {self.name}")
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        took = time.monotonic() - self.t0
        times.append((self.name, took))
        log(f"--- {self.name}: {took:.1f} s{' (failed)' if exc[0] else ''}")
        return False


def run(cmd, check=True, timeout=600, env=None, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    if check and res.returncode != 0:
        raise Failure(f"{cmd if isinstance(cmd, str) else ' '.join(cmd)} exited {res.returncode}:\n"
                      f"{res.stdout}{res.stderr}")
    return res



def wait_for(what, probe, timeout, interval=0.5):
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise Failure(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Stack:
    """The compose command, the environment and the substitutions that point the README's
    commands at this test's project, ports and directories."""

    def __init__(self, work, no_build=False):
        self.work, self.no_build = work, no_build
        self.data = os.path.join(work, "data")
        os.makedirs(self.data)
        if run(["docker", "compose", "version"], check=False).returncode == 0:
            base = ["docker", "compose"]
        elif shutil.which("docker-compose"):
            base = ["docker-compose"]
        else:
            raise Failure("neither `docker compose` nor docker-compose is installed")
        self.compose_cmd = base + ["-p", PROJECT, "-f", COMPOSE_FILE]
        self.ports = {"MOORING_COMPOSE_API_PORT": free_port()}
        for i in (1, 2, 3):
            self.ports[f"MOORING_COMPOSE_HA_API_PORT_{i}"] = free_port()
        self.env = dict(os.environ, MOORING_COMPOSE_DATA=self.data, COMPOSE_HTTP_TIMEOUT="300",
                        **{k: str(v) for k, v in self.ports.items()})
        self.env_file = os.path.join(work, "env.sh")
        open(self.env_file, "w").close()

    def compose(self, *args, check=True, timeout=600):
        return run(self.compose_cmd + list(args), check=check, timeout=timeout, env=self.env, cwd=REPO)

    def api_port(self, member=None):
        return self.ports["MOORING_COMPOSE_API_PORT" if member is None else f"MOORING_COMPOSE_HA_API_PORT_{member}"]

    def rewrite(self, line):
        line = line.replace("docker compose -f docker/compose.yaml", " ".join(self.compose_cmd))
        line = line.replace("sudo ", "")
        line = line.replace("/var/lib/mooring-compose", self.data)
        line = line.replace("$PWD/.mooring-compose", self.work).replace(".mooring-compose", self.work)
        line = line.replace("127.0.0.1:4700", f"127.0.0.1:{self.api_port()}")
        for i, published in ((1, 4710), (2, 4720), (3, 4730)):
            line = line.replace(f"127.0.0.1:{published}", f"127.0.0.1:{self.api_port(i)}")
        return line

    def shell(self, line, timeout=600):
        """One line in bash with the variables earlier lines exported (the README's `export`)."""
        script = f"source {self.env_file}\n{line}\nrc=$?\nexport -p > {self.env_file}\nexit $rc\n"
        return run(["bash", "-c", script], check=False, timeout=timeout, env=self.env, cwd=REPO)

    def cli(self, *args, member=None, check=True, timeout=60):
        env = dict(self.env, MOORING_ADDR=f"https://127.0.0.1:{self.api_port(member)}",
                   MOORING_CACERT=os.path.join(self.work, "ha-ca.pem" if member else "ca.pem"))
        with open(os.path.join(self.work, "ha-bootstrap-token" if member else "bootstrap-token")) as f:
            env["MOORING_TOKEN"] = f.read().strip()
        return run([os.path.join(self.work, "mooring")] + list(args), check=check, timeout=timeout, env=env)

    def container(self, service):
        cid = self.compose("--profile", "ha", "ps", "-q", service).stdout.strip()
        if not cid:
            raise Failure(f"{service} has no container")
        return cid


def readme_block(name):
    text = open(README).read()
    m = re.search(rf"<!-- {name}:begin -->\s*```sh\n(.*?)```\s*<!-- {name}:end -->", text, re.S)
    if not m:
        raise Failure(f"docker/README.md has no {name} block")
    out = []
    for line in m.group(1).splitlines():
        if not line.strip():
            continue
        em = re.search(r"#\s*expect:\s*(.+)$", line)
        out.append((line, em.group(1).strip() if em else None))
    return out


def phase_of(line, default):
    m = re.search(r"docker compose -f docker/compose\.yaml (?:--profile ha )?(build|up|down)", line)
    return {"build": f"{default}: build", "up": f"{default}: up"}.get(m.group(1), default) if m else default


def run_block(stack, lines, label, stop_at=None):
    """Runs README lines in order until one matches stop_at; returns the lines not run."""
    for i, (line, expect) in enumerate(lines):
        if stop_at and re.search(stop_at, line):
            return lines[i:]
        if stack.no_build and phase_of(line, label).endswith(": build"):
            log(f"--no-build: skipped `{line.split('#')[0].strip()}`; the images mooring/*:dev are used as they are")
            continue
        command = stack.rewrite(line)
        with Phase(f"{phase_of(line, label)} | {line.split('#')[0].strip()[:70]}"):
            if expect is None:
                res = stack.shell(command, timeout=3 * 3600)
                if res.returncode != 0:
                    raise Failure(f"`{command}` exited {res.returncode}:\n{res.stdout}{res.stderr}")
                continue
            last = {}

            def holds():
                last["res"] = stack.shell(command, timeout=120)
                out = last["res"].stdout + last["res"].stderr
                return last["res"].returncode == 0 and re.search(expect, out, re.M)
            try:
                wait_for(f"/{expect}/ from `{command}`", holds, timeout=180, interval=1)
            except Failure as e:
                res = last.get("res")
                raise Failure(f"{e}; last output:\n{res.stdout}{res.stderr}" if res else str(e))
    return []


# ---- what is left after down ----
def mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [ln.split()[4] for ln in f if ln.split()[4].startswith(path.rstrip("/") + "/")]


def check_down(stack, volumes_before, with_volumes):
    left = run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"]).stdout.split()
    if left:
        raise Failure(f"containers left after down: {left}")
    mounts = mounts_under(stack.data)
    if mounts:
        raise Failure(f"mounts left under {stack.data} after down: {mounts}")
    if with_volumes:
        new = set(run(["docker", "volume", "ls", "-q"]).stdout.split()) - volumes_before
        if new:
            raise Failure(f"volumes left after down -v: {sorted(new)}")
        nets = run(["docker", "network", "ls", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}"]).stdout.split()
        if nets:
            raise Failure(f"networks left after down -v: {nets}")
    log(f"nothing left: no container, no mount{', no volume, no network' if with_volumes else ''}")


# ---- crashes ----
def crash(stack, service):
    """SIGKILL to the container's init (tini): the container dies whole, as in a crash, and the
    restart policy applies (`docker kill` would count as a manual stop)."""
    cid = stack.container(service)
    state = json.loads(run(["docker", "inspect", cid]).stdout)[0]
    os.kill(state["State"]["Pid"], 9)
    return cid, state["RestartCount"], state["State"]["Pid"]


def back_up(cid, restarts, pid):
    state = json.loads(run(["docker", "inspect", cid]).stdout)[0]
    return state["State"]["Running"] and state["RestartCount"] > restarts and state["State"]["Pid"] != pid


def claims(stack, member=None):
    return json.loads(stack.cli("-json", "volume", "status", "data", member=member).stdout).get("Claims") or []


def alloc_file(stack, name, node, command, read_only=False):
    mode = "single-node-reader-only" if read_only else "single-node-writer"
    body = {"Allocation": {"Name": name, "NodeID": node, "Volumes": {"data": {
        "Type": "csi", "Source": "data", "ReadOnly": read_only, "AccessMode": mode, "AttachmentMode": "file-system"}},
        "Task": {"Command": "/bin/sh", "Args": ["-c", command], "KillTimeout": "5s"}}}
    path = os.path.join(stack.work, f"{name}.json")
    with open(path, "w") as f:
        json.dump(body, f)
    return path


def lifecycle(stack, name, node, member=None):
    """Claim, write, stop, freed: the whole path through a (restarted) node or control plane."""
    stack.cli("alloc", "run", alloc_file(stack, name, node, f"echo {name} > \"$MOORING_VOLUME_DATA/{name}.txt\"; sleep 3600"),
              member=member)
    wait_for(f"{name}'s claim on {node}", lambda: any(c.get("NodeID") == node for c in claims(stack, member)), 120)
    # The plugin's mounts reach the host through the shared data dir: the task's file is there.
    wait_for(f"{name}'s file in its volume, seen from the host",
             lambda: any(os.path.exists(os.path.join(m, f"{name}.txt")) for m in mounts_under(stack.data)), 60)
    stack.cli("alloc", "stop", name, member=member)
    wait_for(f"{name}'s claim freed", lambda: not claims(stack, member), 120)


def agent_kill(stack):
    with Phase("agent kill: a writer on node-1, agent-1 killed, back"):
        stack.cli("alloc", "stop", "reader")  # the walkthrough's reader: the writer below needs the volume
        wait_for("the reader's claim freed", lambda: not claims(stack), 120)
        stack.cli("alloc", "run", alloc_file(stack, "doomed", "node-1", "sleep 3600"))
        wait_for("doomed's claim", lambda: any(c.get("AllocationID") for c in claims(stack)), 120)
        cid, restarts, pid = crash(stack, "agent-1")
        t0 = time.monotonic()
        wait_for("agent-1 restarted", lambda: back_up(cid, restarts, pid), 60, interval=0.1)
        log(f"agent-1 running again {time.monotonic() - t0:.1f} s after kill -9")
        wait_for("the killed task's claim freed", lambda: not claims(stack), 180)
        log(f"the dead task's claim freed {time.monotonic() - t0:.1f} s after kill -9")
    with Phase("agent kill: a lifecycle on the restarted node"):
        lifecycle(stack, "after-kill", "node-1")
        stack.cli("alloc", "stop", "doomed", check=False)
    # `down` is checked with a task running, its volume mounted: a reader on the other node.
    stack.cli("alloc", "run", alloc_file(stack, "last-reader", "node-2", "cat \"$MOORING_VOLUME_DATA/after-kill.txt\"; sleep 3600",
                                         read_only=True))
    wait_for("last-reader's volume mounted", lambda: claims(stack) and mounts_under(stack.data), 120)


def ha(stack, volumes_before):
    lines = readme_block("compose-ha-walkthrough")
    run_block(stack, lines, "ha")
    with Phase("ha: a claim taken through a standby"):
        leader = leader_member(stack)
        standby = next(i for i in (1, 2, 3) if i != leader)
        stack.cli("volume", "create", os.path.join(REPO, "examples", "volume-create.json"), member=standby)
        stack.cli("alloc", "run", alloc_file(stack, "ha-writer", "node-ha-1", "sleep 3600"), member=standby)
        wait_for("ha-writer's claim", lambda: claims(stack, standby), 120)
    with Phase(f"ha: leader controlplane-ha-{leader} killed, a write through a standby"):
        cid, restarts, pid = crash(stack, f"controlplane-ha-{leader}")
        t0 = time.monotonic()
        wait_for("the stop accepted through a standby",
                 lambda: stack.cli("alloc", "stop", "ha-writer", member=standby, check=False).returncode == 0, 60, 0.1)
        log(f"first write after the leader's kill -9: {time.monotonic() - t0:.1f} s")
        wait_for("ha-writer's claim freed", lambda: not claims(stack, standby), 120)
        wait_for(f"controlplane-ha-{leader} restarted", lambda: back_up(cid, restarts, pid), 60)
        wait_for(f"controlplane-ha-{leader} answers as a standby",
                 lambda: leader_member(stack, ask=leader, quiet=True) not in (None, leader), 120)
        lifecycle(stack, "ha-after-kill", "node-ha-1", member=leader)
    with Phase("ha: down -v"):
        stack.compose("--profile", "ha", "down", "-v", timeout=300)
        check_down(stack, volumes_before, with_volumes=True)


def leader_member(stack, ask=None, quiet=False):
    for member in ([ask] if ask else (1, 2, 3)):
        res = run(["curl", "-fsS", "--cacert", os.path.join(stack.work, "ha-ca.pem"),
                   f"https://127.0.0.1:{stack.api_port(member)}/v1/status/leader"], check=False)
        m = re.search(r"controlplane-ha-(\d)", res.stdout)
        if m:
            return int(m.group(1))
    if quiet:
        return None
    raise Failure("no member names a leader")


# ---- setup ----
def ensure_dockerd(work):
    if run(["docker", "info"], check=False).returncode == 0:
        return None
    if not shutil.which("dockerd"):
        raise Failure("no Docker engine answers and dockerd is not installed (apt-get install docker.io)")
    log("no Docker engine answers: starting dockerd (niced, so builds yield to other work)")
    logf = open(os.path.join(work, "dockerd.log"), "w")
    proc = subprocess.Popen(["nice", "-n", "19", "dockerd"], stdout=logf, stderr=subprocess.STDOUT)
    wait_for("dockerd", lambda: run(["docker", "info"], check=False).returncode == 0, 60)
    return proc


def base_images(stack):
    wanted = ["debian:bookworm", "debian:bookworm-slim"]
    if all(run(["docker", "image", "inspect", w], check=False).returncode == 0 or
           run(["docker", "pull", w], check=False, timeout=120).returncode == 0 for w in wanted):
        log("base images: Docker Hub's debian:bookworm and debian:bookworm-slim")
        return
    made = run([os.path.join(REPO, "tests", "compose", "base-images.sh")], timeout=3600).stdout.split()
    stack.env.update(MOORING_BASE_IMAGE=made[0], MOORING_RUNTIME_BASE_IMAGE=made[1])
    log(f"base images: made from Debian's packages: {made[0]}, {made[1]}")


def cleanup(stack, dockerd, keep):
    if keep:
        log(f"--keep: the stack stays up (project {PROJECT}, files in {stack.work})")
        return
    stack.compose("--profile", "ha", "down", "-v", "--remove-orphans", check=False, timeout=300)
    # Deepest first; the data dir itself is one too (host-setup.sh's shared bind mount, which
    # os.path.ismount does not see: same file system).
    for m in sorted(mounts_under(stack.work), key=len, reverse=True):
        run(["umount", "-l", m], check=False)
    if not mounts_under(stack.work):
        shutil.rmtree(stack.work, ignore_errors=True)
    else:
        log(f"left {stack.work} in place: something is still mounted under it")
    if dockerd:
        dockerd.terminate()
        try:
            dockerd.wait(60)
        except subprocess.TimeoutExpired:
            dockerd.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", action="store_true", help="leave the stack up at the end (debugging)")
    ap.add_argument("--skip-ha", action="store_true", help="only the default stack")
    ap.add_argument("--no-build", action="store_true", help="skip the README's build lines: use the images there are")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("compose-test: run as root (dockerd, the shared mount, the stack's bind mounts)")
        return 1
    work = tempfile.mkdtemp(prefix="mooring-compose-test.", dir="/var/tmp")
    os.chmod(work, 0o755)
    stack, dockerd, ok = Stack(work, args.no_build), None, False
    start = time.monotonic()
    try:
        with Phase("dockerd"):
            dockerd = ensure_dockerd(work)
        if not args.no_build:
            with Phase("base images"):
                base_images(stack)
        volumes_before = set(run(["docker", "volume", "ls", "-q"]).stdout.split())
        rest = run_block(stack, readme_block("compose-walkthrough"), "default", stop_at=r"\bdown\b")
        agent_kill(stack)
        with Phase("default: down (the reader still running)"):
            run_block(stack, rest[:1], "default: down")
            check_down(stack, volumes_before, with_volumes=False)
        with Phase("default: down -v"):
            run_block(stack, rest[1:], "default: down -v")
            check_down(stack, volumes_before, with_volumes=True)
        if not args.skip_ha:
            ha(stack, volumes_before)
        ok = True
    except (Failure, subprocess.TimeoutExpired) as e:
        log(f"FAILED: {e}")
        for service in ("controlplane", "agent-1", "hostpath-1", "controlplane-ha-1", "agent-ha-1"):
            res = stack.compose("--profile", "ha", "logs", "--tail", "30", service, check=False)
            print(res.stdout[-4000:])
    finally:
        cleanup(stack, dockerd, args.keep)
    print("\ncompose-test: wall time by phase")
    for name, took in times:
        print(f"  {took:8.1f} s  {name}")
    print(f"  {time.monotonic() - start:8.1f} s  in all")
    print(f"\n{1 if ok else 0} passed, {0 if ok else 1} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
