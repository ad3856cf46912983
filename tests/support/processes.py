"""Test support for the script-driven tests (tests/walkthrough, tests/dashboard, tests/defaults):
free ports, starting a process group that dies with the test, stopping one with a deadline, the
mounts a test left under its folder, waiting for a condition, and a small HTTPS client of the API."""
import ctypes
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # Runs in the child before exec: SIGTERM when the test process dies, even by SIGKILL (a
    # ctest timeout, an interrupted run), so no stack outlives the test that started it.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def start_group(args, **kwargs):
    """subprocess.Popen in a new session (stop_group signals the whole group) whose leader gets
    SIGTERM if the test process dies first."""
    return subprocess.Popen(args, start_new_session=True, preexec_fn=_die_with_parent, **kwargs)


def port_free(port):
    """True when a listener can bind 127.0.0.1:port now (as the services bind: SO_REUSEADDR, so
    connections of an earlier listener lingering in TIME_WAIT do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def eventually(check, seconds, every=0.1):
    """Polls check() until it is true (True) or `seconds` pass (False)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return True
        time.sleep(every)
    return False


class Api:
    """The REST API over HTTPS with the stack's CA and an ACL token: call() answers (status,
    headers, body text); status 0 and the error's text when nothing answered."""

    def __init__(self, ca, token):
        self.ctx = ssl.create_default_context(cafile=ca)
        self.token = token

    def call(self, method, url, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={"X-Mooring-Token": self.token})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()
        except (urllib.error.URLError, OSError) as e:
            return 0, {}, str(e)


def running_processes():
    """(pid, argv as bytes) of every running process (zombies left out)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")[:-1]
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            yield int(entry), args


def processes_using(path):
    """(pid, command line) of every running process whose command line, working directory or an
    open descriptor names something under `path`: what a test that keeps a stack's data there
    left behind (services, plugins, tasks, whose log files are there)."""
    prefix = path.rstrip("/") + "/"
    found = []
    for pid, args in running_processes():
        if pid == os.getpid():
            continue
        cmdline = b" ".join(args).decode(errors="replace")
        try:
            links = [os.readlink(f"/proc/{pid}/cwd") + "/"]
            links += [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            links = []
        if prefix in cmdline or any(link.startswith(prefix) for link in links):
            found.append((pid, cmdline))
    return found


def kill_left(path):
    """SIGKILLs what processes_using(path) finds and returns it (a failed test's leftovers)."""
    left = processes_using(path)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


_handed_out = set()


def free_port():
    """A free port below the kernel's ephemeral range (32768 and up), where other tests' outgoing
    connections take their local ports: one picked there and closed could be taken before the
    process meant for it binds it (the same rule as tests/support/etcd_process.cpp)."""
    for _ in range(200):
        port = random.randint(20000, 32000)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError("free_port: no free port between 20000 and 32000 after 200 tries")


def stop_group(process, sig, timeout):
    """Sends `sig` to the process's group and waits up to `timeout` s; SIGKILLs it after that.
    True when it stopped on `sig` in time."""
    if process.poll() is not None:
        return True
    os.killpg(process.pid, sig)
    try:
        process.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return False


def mounts_under(path):
    prefix = path.rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(prefix)]


def unmount_left(path):
    """The mounts still under `path` (a failed test's), each unmounted lazily, deepest first."""
    left = mounts_under(path)
    for m in sorted(left, key=len, reverse=True):
        subprocess.run(["umount", "-l", m])
    return left
