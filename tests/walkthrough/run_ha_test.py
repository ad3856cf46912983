#!/usr/bin/env python3
"""`make run-ha` as a reader runs it: scripts/run-ha.sh with this build's binaries, its ports
moved by MOORING_HA_PORT_BASE and its data in a temporary dir. Checks what the script promises:
a leader named by every member, writes through a standby (answered by the leader, which
X-Mooring-Leader names), etcd reachable only over TLS with the control planes' etcd certificate
(not in plaintext, not with the agent's certificate from the Mooring CA), a standby leading after
the leader's kill -9, and Ctrl-C stopping everything with nothing left mounted.
Exit 77 (skipped) when not root or etcd is not installed.
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from processes import Api, eventually, port_free, start_group, stop_group, unmount_left  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release")
ETCDCTL = "/usr/bin/etcdctl"


def pick_base():
    """A base whose 60 ports (http, grpc, etcd clients and peers of three members, the agent) are free."""
    for _ in range(50):
        base = random.randrange(20000, 40000, 100)
        if all(port_free(base + d) for d in range(0, 60)):
            return base
    raise RuntimeError("no free block of ports")


def etcdctl(endpoint, *flags):
    r = subprocess.run([ETCDCTL, "--endpoints", endpoint, "--dial-timeout", "2s", "--command-timeout", "3s", *flags,
                        "get", "--prefix", "--keys-only", "/mooring/leader"],
                       env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True)
    return r.returncode == 0 and "/mooring/leader" in r.stdout


def main():
    if os.geteuid() != 0:
        print("SKIP: run-ha needs root (the hostpath plugin bind-mounts volumes)")
        return 77
    if not os.path.exists("/usr/bin/etcd") or not os.path.exists(ETCDCTL):
        print("SKIP: etcd-server / etcd-client are not installed (apt-get install etcd-server etcd-client)")
        return 77
    data = tempfile.mkdtemp(prefix="mooring-run-ha-")
    base = pick_base()
    http = [f"https://127.0.0.1:{base + 10 * i}" for i in range(3)]
    env = dict(os.environ, MOORING_BIN=BUILD, MOORING_DATA=data, MOORING_HA_PORT_BASE=str(base))
    log = open(os.path.join(data, "run-ha.out"), "w+")
    stack = start_group([os.path.join(ROOT, "scripts", "run-ha.sh")], cwd=ROOT, env=env, stdout=log,
                        stderr=subprocess.STDOUT)
    ok = False
    try:
        if not eventually(lambda: "Mooring HA is running" in open(log.name).read() or stack.poll() is not None, 180) \
                or stack.poll() is not None:
            raise RuntimeError("the HA stack did not come up")
        api = Api(os.path.join(data, "tls", "ca.pem"), open(os.path.join(data, "bootstrap-token")).read().strip())
        leaders = {api.call("GET", f"{u}/v1/status/leader")[2].strip('"') for u in http}
        if len(leaders) != 1 or not leaders.issubset(set(http)):
            raise RuntimeError(f"the members name different leaders: {leaders}")
        leader = leaders.pop()
        standbys = [u for u in http if u != leader]
        print(f"leader {leader}; standbys {standbys}")
        policy = {"Name": "p1", "Rules": {"Namespace": {"*": {"Policy": "read"}}}}
        status, headers, body = api.call("PUT", f"{standbys[0]}/v1/acl/policy/p1", policy)
        if status != 200 or headers.get("X-Mooring-Leader") != leader:
            raise RuntimeError(f"a write through a standby: {status} {headers.get('X-Mooring-Leader')} {body}")

        # etcd: only the control planes' etcd client certificate opens it.
        etcd = f"https://127.0.0.1:{base + 31}"
        etcd_tls = os.path.join(data, "tls", "etcd")
        node_id = open(os.path.join(data, "agent", "node-id")).read().strip()
        agent_cert = os.path.join(data, "tls", f"agent-{node_id}")
        if not etcdctl(etcd, "--cacert", f"{etcd_tls}/client/ca.pem", "--cert", f"{etcd_tls}/client/client.pem",
                       "--key", f"{etcd_tls}/client/client-key.pem"):
            raise RuntimeError("etcd does not answer the control planes' etcd certificate")
        if etcdctl(f"http://127.0.0.1:{base + 31}"):
            raise RuntimeError("etcd answers in plaintext")
        if etcdctl(etcd, "--cacert", f"{etcd_tls}/client/ca.pem", "--cert", f"{agent_cert}.pem", "--key",
                   f"{agent_cert}-key.pem"):
            raise RuntimeError("etcd answers a node agent's certificate")
        print("etcd: TLS with its own CA; plaintext and the agent's certificate refused")

        # kill -9 the leader, as the script's banner suggests: a standby leads and takes writes.
        index = http.index(leader)
        os.kill(int(open(os.path.join(data, f"cp{index}.pid")).read()), signal.SIGKILL)
        killed = time.time()
        if not eventually(lambda: api.call("PUT", f"{standbys[1]}/v1/acl/policy/p2",
                                           dict(policy, Name="p2"))[0] == 200, 20):
            raise RuntimeError("no write served after the leader's kill -9")
        print(f"failover: first write served {time.time() - killed:.1f} s after kill -9")
        if stack.poll() is not None:
            raise RuntimeError("run-ha.sh exited when a control plane was killed")
        ok = True
    except Exception as e:  # noqa: BLE001 (reported below with the logs)
        print(f"FAIL: {e}")
    finally:
        if not stop_group(stack, signal.SIGINT, 90):
            ok = False
            print("FAIL: the HA stack did not stop within 90 s of Ctrl-C")
        left = unmount_left(data)
        if left:
            ok = False
            print("FAIL: still mounted after Ctrl-C:", left)
        out = open(log.name).read()
        if "nothing left mounted" not in out:
            ok = False
            print("FAIL: run-ha.sh did not report a clean stop")
        if not ok:
            print("---- run-ha output (tail) ----\n" + out[-6000:])
        shutil.rmtree(data, ignore_errors=True)
    print("run-ha: OK" if ok else "run-ha: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
