"""Test support for the script-driven tests (tests/walkthrough, tests/dashboard): free ports,
starting a process group that dies with the test, stopping one with a deadline, and the mounts a
test left under its folder."""
import ctypes
import os
import signal
import socket
import subprocess

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # Runs in the child before exec: SIGTERM when the test process dies, even by SIGKILL (a
    # ctest timeout, an interrupted run), so no stack outlives the test that started it.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def start_group(args, **kwargs):
    """subprocess.Popen in a new session (stop_group signals the whole group) whose leader gets
    SIGTERM if the test process dies first."""
    return subprocess.Popen(args, start_new_session=True, preexec_fn=_die_with_parent, **kwargs)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
