"""Test support for the script-driven tests (tests/walkthrough, tests/dashboard): free ports,
stopping a process group with a deadline, and the mounts a test left under its folder."""
import os
import signal
import socket
import subprocess


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
