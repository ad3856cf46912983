#!/usr/bin/env python3
"""docker/mooring-init.sh, run for real with the built binaries (no docker needed).

  - `tls` makes the CA and the server certificate once (0600); a second run changes nothing;
  - the real control plane starts with them over HTTPS (plain HTTP gets no answer), with the CA
    key for enrollment;
  - `acl` bootstraps once and keeps the management token, then makes the node-enroll policy
    and token (0600); a second run changes nothing;
  - `enroll` gets node-1 a certificate for a key made on the agent's side, through a one-time
    introduction token it makes with the node-enroll token; a second run requests nothing and
    makes no token; the real node agent then registers over mutual TLS with it, and the control
    plane records its key and pins the certificate;
  - while node-1 is live, enrolling it again is refused (409 naming the node), an unknown token
    makes no introduction token (401), and an introduction token file enrolls its own node once;
  - `k8s-tls` / `k8s-acl` against a stand-in Kubernetes API keep the same files as Secrets:
    created when absent, read (never replaced) when present;
  - high availability: `tls -etcd-dir -etcd-dns -etcd-ip -keyring` makes etcd's TLS from a CA of its own
    (not the Mooring CA; its key only in ca/, never beside the member or client files; 0600;
    SANs and key usages checked with openssl) and the shared keyring, once; a real etcd serves
    with the member files, a real control plane leads on it with the client certificate, and
    that etcd refuses plaintext, no certificate, a node agent's certificate and the control
    plane's own server certificate (anything the Mooring CA signed); `k8s-tls -etcd-secrets
    -keyring-secret` keeps them as separate Secrets (members', control planes', the etcd CA's),
    made once; a lost client Secret is made again from the kept CA; a lost CA is refused.
Every process and directory is removed at the end, also when a check fails.
Exit 0 when all passed, 1 on a failure, 77 (skip) when the binaries are not built.
"""
import argparse
import base64
import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import free_port  # noqa: E402  (below the ephemeral range, never twice)

ARGS = None
SCRIPT = None



def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


class FakeKubernetes(http.server.ThreadingHTTPServer):
    """GET and POST of Secrets in one namespace, as the API server answers them."""

    def __init__(self, namespace):
        self.namespace = namespace
        self.secrets = {}
        self.posts = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), FakeKubernetesHandler)


class FakeKubernetesHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        if self.headers.get("Authorization") != "Bearer sa-token":
            self.answer(401, {"kind": "Status", "code": 401})
            return False
        return True

    def do_GET(self):  # noqa: N802
        if not self.authorized():
            return
        prefix = f"/api/v1/namespaces/{self.server.namespace}/secrets/"
        name = self.path[len(prefix):] if self.path.startswith(prefix) else None
        with self.server.lock:
            secret = self.server.secrets.get(name)
        if secret is None:
            return self.answer(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        self.answer(200, secret)

    def do_POST(self):  # noqa: N802
        if not self.authorized():
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name = body["metadata"]["name"]
        with self.server.lock:
            self.server.posts.append(name)
            if name in self.server.secrets:
                return self.answer(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"})
            self.server.secrets[name] = body
        self.answer(201, body)


class InitScriptTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.procs = []
        cls.dir = tempfile.mkdtemp(prefix="mooring-init-test-")
        cls.env = dict(os.environ, MOORING=ARGS.cli, ASAN_OPTIONS="detect_leaks=0", MOORING_INIT_WAIT="60")
        for k in ("MOORING_ADDR", "MOORING_TOKEN", "MOORING_CACERT"):
            cls.env.pop(k, None)
        try:
            cls.start_controlplane()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for p in reversed(cls.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for p in cls.procs:
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    # ---- helpers ----
    @classmethod
    def path(cls, *parts):
        return os.path.join(cls.dir, *parts)

    @classmethod
    def init(cls, *args, env=None, check=True):
        res = subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=120,
                             env=dict(cls.env, **(env or {})))
        if check and res.returncode != 0:
            raise AssertionError(f"mooring-init.sh {' '.join(args)} exited {res.returncode}:\n{res.stderr}")
        return res

    @classmethod
    def spawn(cls, argv, log):
        out = open(cls.path(log), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=cls.env)
        p.stdout = out  # closed in tearDownClass
        cls.procs.append(p)
        return p

    @classmethod
    def wait_for(cls, what, cond, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    @classmethod
    def start_controlplane(cls):
        cls.init("tls", "-dir", cls.path("tls"))
        cls.http_port, cls.grpc_port = free_port(), free_port()
        cls.api = f"https://127.0.0.1:{cls.http_port}"
        tls = cls.path("tls")
        cls.cp = cls.spawn([ARGS.controlplane, "--data-dir", cls.path("cp"),
                            "--http-addr", f"127.0.0.1:{cls.http_port}", "--grpc-addr", f"127.0.0.1:{cls.grpc_port}",
                            "--tls-ca-file", f"{tls}/ca.pem", "--tls-cert-file", f"{tls}/server.pem",
                            "--tls-key-file", f"{tls}/server-key.pem", "--tls-ca-key-file", f"{tls}/ca-key.pem",
                            "--heartbeat-ttl", "10s"], "controlplane.log")
        cls.wait_for("the control plane's HTTPS API", lambda: cls.cp.poll() is None and cls.get("/v1/status/ready")[0] == 200)
        # acl: bootstrap and the enrollment token.
        cls.acl_args = ["-addr", cls.api, "-ca-cert", f"{tls}/ca.pem", "-token-file", cls.path("admin", "bootstrap-token"),
                        "-enroll-token-file", cls.path("enroll", "token")]
        cls.acl_first = cls.init("acl", *cls.acl_args)

    @classmethod
    def get(cls, path, token=None, method="GET", body=None):
        ctx = ssl.create_default_context(cafile=cls.path("tls", "ca.pem"))
        req = urllib.request.Request(cls.api + path, method=method, data=body)
        if token:
            req.add_header("X-Mooring-Token", token)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            return 0, None

    def read(self, *parts):
        with open(self.path(*parts)) as f:
            return f.read()

    def token(self):
        return self.read("admin", "bootstrap-token").strip()

    def enroll(self, node, directory, token_file=None, check=True):
        return self.init("enroll", "-addr", self.api, "-ca-cert", self.path("tls", "ca.pem"),
                         "-token-file", token_file or self.path("enroll", "token"), "-node-id", node,
                         "-dir", self.path(directory), check=check)

    @staticmethod
    def chains_to(cert, ca):
        """(openssl verify accepts `cert` under `ca`, what it said)."""
        res = subprocess.run(["openssl", "verify", "-CAfile", ca, cert], capture_output=True, text=True)
        return res.returncode == 0, res.stdout + res.stderr

    def openssl_verify(self, cert, ca=None):
        if not shutil.which("openssl"):
            return
        ok, said = self.chains_to(cert, ca or self.path("tls", "ca.pem"))
        self.assertTrue(ok, said)

    def openssl_text(self, cert):
        return subprocess.run(["openssl", "x509", "-noout", "-text", "-in", cert], capture_output=True, text=True,
                              check=True).stdout

    def assert_key_matches(self, cert, key):
        """The private key in `key` is the one `cert` certifies (openssl: both public keys)."""
        pub = lambda *argv: subprocess.run(["openssl", *argv], capture_output=True, text=True, check=True).stdout  # noqa: E731
        self.assertEqual(pub("x509", "-noout", "-pubkey", "-in", cert), pub("pkey", "-pubout", "-in", key), cert)

    def etcd_answers(self, endpoint, *tls):
        """True when etcdctl reads from `endpoint` with the given TLS flags (none: plaintext)."""
        res = subprocess.run(["/usr/bin/etcdctl", "--endpoints", endpoint, "--dial-timeout", "2s",
                              "--command-timeout", "3s", *tls, "get", "--prefix", "--keys-only", "/"],
                             env=dict(self.env, ETCDCTL_API="3"), capture_output=True, text=True, timeout=30)
        return res.returncode == 0

    @contextlib.contextmanager
    def kubernetes(self, sa_dir):
        """A stand-in Kubernetes API and the env that points the init's k8s steps at it."""
        fake = FakeKubernetes("mooring")
        thread = threading.Thread(target=fake.serve_forever, daemon=True)
        thread.start()
        try:
            sa = self.path(sa_dir)
            os.makedirs(sa)
            with open(os.path.join(sa, "token"), "w") as f:
                f.write("sa-token")
            with open(os.path.join(sa, "ca.crt"), "w") as f:
                f.write("")
            yield fake, {"KUBERNETES_API": f"http://127.0.0.1:{fake.server_address[1]}", "MOORING_INIT_SA_DIR": sa}
        finally:
            fake.shutdown()
            fake.server_close()

    ETCD_FILES = {"ca": ["ca-key.pem", "ca.pem"], "member": ["ca.pem", "server-key.pem", "server.pem"],
                  "client": ["ca.pem", "client-key.pem", "client.pem"]}

    def init_cli(self, *argv):
        res = subprocess.run([ARGS.cli, *argv], capture_output=True, text=True, timeout=60, env=self.env)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)

    # ---- tests ----
    def test_1_tls_step_makes_the_ca_and_server_certificate_once(self):
        files = ["ca.pem", "ca-key.pem", "server.pem", "server-key.pem"]
        before = {f: self.read("tls", f) for f in files}
        for f in files:
            self.assertEqual(mode(self.path("tls", f)), 0o600, f)
        again = self.init("tls", "-dir", self.path("tls"))
        self.assertIn("is there", again.stderr)
        self.assertEqual({f: self.read("tls", f) for f in files}, before)
        self.openssl_verify(self.path("tls", "server.pem"))

    def test_2_nothing_listens_in_plaintext(self):
        with socket.create_connection(("127.0.0.1", self.http_port), timeout=5) as s:
            s.sendall(b"GET /v1/status/health HTTP/1.1\r\nHost: x\r\n\r\n")
            s.settimeout(5)
            try:
                reply = s.recv(100)
            except (socket.timeout, ConnectionError):
                reply = b""
        self.assertFalse(reply.startswith(b"HTTP/1.1 200"), reply)

    def test_3_acl_step_bootstraps_once_and_makes_the_enrollment_token(self):
        for f in (("admin", "bootstrap-token"), ("enroll", "token")):
            self.assertEqual(mode(self.path(*f)), 0o600, f)
            self.assertRegex(self.read(*f).strip(), r"^[0-9a-f-]{36}$")
        mgmt, enroll = self.token(), self.read("enroll", "token").strip()
        self.assertNotIn(mgmt, self.acl_first.stderr + self.acl_first.stdout)
        self.assertNotIn(enroll, self.acl_first.stderr + self.acl_first.stdout)
        status, me = self.get("/v1/acl/token/self", mgmt)
        self.assertEqual((status, me["Type"]), (200, "management"))
        status, me = self.get("/v1/acl/token/self", enroll)
        self.assertEqual((status, me["Policies"]), (200, ["node-enroll"]))
        again = self.init("acl", *self.acl_args)
        self.assertIn("done before", again.stderr)
        self.assertEqual((self.token(), self.read("enroll", "token").strip()), (mgmt, enroll))
        self.assertEqual(len(self.get("/v1/acl/tokens", mgmt)[1]), 2)
        # Without the token file, a second bootstrap is refused with a clear message.
        lost = self.init("acl", "-addr", self.api, "-ca-cert", self.path("tls", "ca.pem"),
                         "-token-file", self.path("lost", "token"), "-enroll-token-file", self.path("lost", "e"), check=False)
        self.assertEqual(lost.returncode, 1)
        self.assertIn("not by this init", lost.stderr)

    def test_4_an_enrolled_agent_registers_over_mutual_tls(self):
        self.enroll("node-1", "agent-tls")
        tls = self.path("agent-tls")
        for f in ("agent-node-1.pem", "agent-node-1-key.pem", "ca.pem"):
            self.assertEqual(mode(os.path.join(tls, f)), 0o600, f)
        self.assertEqual(self.read("agent-tls", "ca.pem"), self.read("tls", "ca.pem"))
        self.openssl_verify(os.path.join(tls, "agent-node-1.pem"))
        key = self.read("agent-tls", "agent-node-1-key.pem")
        again = self.enroll("node-1", "agent-tls")
        self.assertIn("nothing to request", again.stdout + again.stderr)
        self.assertEqual(self.read("agent-tls", "agent-node-1-key.pem"), key)
        # One introduction token was made (for the first run only), and it is spent.
        status, identity = self.get("/v1/node/node-1/identity", self.token())
        self.assertEqual(status, 200, identity)
        self.assertEqual(len(identity["Introductions"]), 1, identity)
        self.assertTrue(identity["Introductions"][0].get("UsedTime"), identity)
        self.assertTrue(identity["Certificate"]["Serial"], identity)

        agent = self.spawn([ARGS.nodeagent, "--node-id", "node-1", "--data-dir", self.path("agent"),
                            "--controlplane-addr", f"127.0.0.1:{self.grpc_port}", "--grpc-addr", "127.0.0.1:0",
                            "--metrics-addr", "127.0.0.1:0",
                            "--heartbeat-interval", "1s", "--tls-ca-file", f"{tls}/ca.pem",
                            "--tls-cert-file", f"{tls}/agent-node-1.pem", "--tls-key-file", f"{tls}/agent-node-1-key.pem"],
                           "agent.log")
        mgmt = self.token()

        def registered():
            self.assertIsNone(agent.poll(), self.read("agent.log"))
            status, node = self.get("/v1/node/node-1", mgmt)
            return status == 200 and node.get("Status") == "ready" and node.get("CertificateKeySHA256")
        self.wait_for("node-1 to register over mutual TLS", registered)

        # node-1 is live: it renews its own certificate, nobody enrolls it again.
        other = self.enroll("node-1", "intruder", check=False)
        self.assertEqual(other.returncode, 1)
        self.assertIn('node "node-1" is live', other.stderr)
        self.assertFalse(os.path.exists(self.path("intruder", "agent-node-1.pem")))
        # A node's own introduction token (made by an operator) enrolls it once, with no node:write.
        made = subprocess.run([ARGS.cli, "node", "intro", "create", "-node-id", "node-8", "-out", self.path("intro-8")],
                              env=dict(self.env, MOORING_ADDR=self.api, MOORING_CACERT=self.path("tls", "ca.pem"),
                                       MOORING_TOKEN=mgmt), capture_output=True, text=True, timeout=60)
        self.assertEqual(made.returncode, 0, made.stderr)
        self.assertEqual(mode(self.path("intro-8")), 0o600)
        self.assertNotIn(self.read("intro-8").strip(), made.stdout + made.stderr)
        by_intro = self.init("enroll", "-addr", self.api, "-ca-cert", self.path("tls", "ca.pem"),
                             "-intro-token-file", self.path("intro-8"), "-node-id", "node-8", "-dir", self.path("node-8"))
        self.assertTrue(os.path.exists(self.path("node-8", "agent-node-8.pem")), by_intro.stderr)
        os.remove(self.path("node-8", "agent-node-8.pem"))
        used = self.init("enroll", "-addr", self.api, "-ca-cert", self.path("tls", "ca.pem"),
                         "-intro-token-file", self.path("intro-8"), "-node-id", "node-8", "-dir", self.path("node-8"),
                         check=False)
        self.assertEqual(used.returncode, 1)
        self.assertIn("was used at", used.stderr)
        # A token without node:write is refused.
        with open(self.path("reader-token"), "w") as f:
            f.write("00000000-0000-0000-0000-000000000000\n")
        refused = self.enroll("node-7", "reader", token_file=self.path("reader-token"), check=False)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("ACL token not found", refused.stderr)

    def test_5_kubernetes_steps_keep_the_files_as_secrets(self):
        with self.kubernetes("sa") as (fake, k8s):
            self.init("k8s-tls", "-namespace", "mooring", "-dns", "mooring-controlplane", env=k8s)
            self.assertEqual(sorted(fake.secrets), ["mooring-ca", "mooring-controlplane-tls"])
            data = fake.secrets["mooring-controlplane-tls"]["data"]
            self.assertEqual(sorted(data), ["ca-key.pem", "ca.pem", "server-key.pem", "server.pem"])
            self.assertEqual(fake.secrets["mooring-ca"]["data"], {"ca.pem": data["ca.pem"]})
            server = base64.b64decode(data["server.pem"]).decode()
            self.assertIn("BEGIN CERTIFICATE", server)
            posts = list(fake.posts)
            again = self.init("k8s-tls", "-namespace", "mooring", env=k8s)
            self.assertEqual(fake.posts, posts, again.stderr)

            # k8s-acl against the running control plane: its CA and management token as Secrets
            # (as if k8s-tls and an earlier k8s-acl made them); the enrollment token is added.
            def secret(name, key, text):
                fake.secrets[name] = {"metadata": {"name": name},
                                      "data": {key: base64.b64encode(text.encode()).decode()}}
            secret("mooring-ca", "ca.pem", self.read("tls", "ca.pem"))
            secret("mooring-bootstrap-token", "token", self.read("admin", "bootstrap-token"))
            res = self.init("k8s-acl", "-namespace", "mooring", "-addr", self.api, env=k8s)
            self.assertIn("mooring-enroll-token", fake.secrets, res.stderr)
            token = base64.b64decode(fake.secrets["mooring-enroll-token"]["data"]["token"]).decode().strip()
            self.assertNotIn(token, res.stderr + res.stdout)
            with open(self.path("k8s-enroll-token"), "w") as f:
                f.write(token)
            self.enroll("node-2", "node-2-tls", token_file=self.path("k8s-enroll-token"))
            posts = list(fake.posts)
            self.init("k8s-acl", "-namespace", "mooring", "-addr", self.api, env=k8s)
            self.assertEqual(fake.posts, posts)

    def test_6_ha_files_etcd_certificates_of_their_own_ca_and_keyring(self):
        bad = self.init("tls", "-dir", self.path("tls"), "-etcd-dir", self.path("etcd-tls"), check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("-etcd-dns", bad.stderr)
        args = ["tls", "-dir", self.path("tls"), "-etcd-dir", self.path("etcd-tls"), "-etcd-dns", "etcd-1",
                "-etcd-dns", "etcd-2", "-etcd-ip", "10.99.0.11", "-keyring", self.path("keyring", "keyring")]
        first = self.init(*args)
        for made in ("etcd CA: created", "etcd member certificate: created", "etcd client certificate: created",
                     "keyring: created"):
            self.assertIn(made, first.stderr)
        et = self.path("etcd-tls")
        self.assertEqual(sorted(os.listdir(et)), sorted(self.ETCD_FILES))
        files = {}
        for sub, names in self.ETCD_FILES.items():
            # The etcd CA's key only in ca/: never beside what members or control planes mount.
            self.assertEqual(sorted(os.listdir(os.path.join(et, sub))), names, sub)
            for f in names:
                self.assertEqual(mode(os.path.join(et, sub, f)), 0o600, f"{sub}/{f}")
                files[f"{sub}/{f}"] = self.read("etcd-tls", sub, f)
        etcd_ca = files["ca/ca.pem"]
        self.assertEqual(files["member/ca.pem"], etcd_ca)
        self.assertEqual(files["client/ca.pem"], etcd_ca)
        self.assertNotEqual(etcd_ca, self.read("tls", "ca.pem"), "etcd's CA must not be the Mooring CA")
        if shutil.which("openssl"):
            for cert in ("member/server.pem", "client/client.pem"):
                self.openssl_verify(f"{et}/{cert}", f"{et}/ca/ca.pem")
                self.assertFalse(self.chains_to(f"{et}/{cert}", self.path("tls", "ca.pem"))[0],
                                 f"{cert} must not chain to the Mooring CA")
            self.assert_key_matches(f"{et}/member/server.pem", f"{et}/member/server-key.pem")
            self.assert_key_matches(f"{et}/client/client.pem", f"{et}/client/client-key.pem")
            self.assert_key_matches(f"{et}/ca/ca.pem", f"{et}/ca/ca-key.pem")
            member = self.openssl_text(f"{et}/member/server.pem")
            for name in ("DNS:etcd-1", "DNS:etcd-2", "DNS:localhost", "IP Address:127.0.0.1", "IP Address:10.99.0.11"):
                self.assertIn(name, member)
            self.assertIn("TLS Web Server Authentication, TLS Web Client Authentication", member)  # peers dial too
            client = self.openssl_text(f"{et}/client/client.pem")
            self.assertIn("TLS Web Client Authentication", client)
            self.assertNotIn("TLS Web Server Authentication", client)
        keyring = json.loads(self.read("keyring", "keyring"))
        self.assertEqual(mode(self.path("keyring", "keyring")), 0o600)
        self.assertEqual(keyring["Format"], "mooring-keyring/1")
        self.assertEqual([k["ID"] for k in keyring["Keys"]], [keyring["Active"]])
        self.assertEqual(len(base64.b64decode(keyring["Keys"][0]["Key"])), 32)
        again = self.init(*args)
        self.assertIn("keyring: " + self.path("keyring", "keyring") + " is there", again.stderr)
        self.assertIn("etcd member certificate: " + f"{et}/member/server.pem is there", again.stderr)
        self.assertEqual({f: self.read("etcd-tls", *f.split("/")) for f in files}, files)
        self.assertEqual(json.loads(self.read("keyring", "keyring")), keyring)

        # The etcd CA lost while what it signed remains: refused, nothing changed.
        shutil.copytree(et, self.path("etcd-tls-lost"))
        shutil.rmtree(self.path("etcd-tls-lost", "ca"))
        lost = self.init("tls", "-dir", self.path("tls"), "-etcd-dir", self.path("etcd-tls-lost"), "-etcd-dns", "etcd-1",
                         check=False)
        self.assertEqual(lost.returncode, 1)
        self.assertIn("etcd's CA", lost.stderr)
        self.assertFalse(os.path.exists(self.path("etcd-tls-lost", "ca")))

        if not os.access("/usr/bin/etcd", os.X_OK) or not os.access("/usr/bin/etcdctl", os.X_OK):
            self.skipTest("etcd-server/etcd-client are not installed; the certificates and keyring were not used by etcd")
        # Three members, as compose and the StatefulSet run them: one member certificate for all,
        # peer TLS with client certificates required, both trusting etcd's CA only.
        clients, peers = [free_port() for _ in range(3)], [free_port() for _ in range(3)]
        http, grpc = free_port(), free_port()
        m = f"{et}/member"
        cluster = ",".join(f"m{i}=https://127.0.0.1:{peers[i]}" for i in range(3))
        for i in range(3):
            self.spawn(["/usr/bin/etcd", "--name", f"m{i}", "--data-dir", self.path(f"etcd-data-{i}"),
                        "--listen-client-urls", f"https://127.0.0.1:{clients[i]}",
                        "--advertise-client-urls", f"https://127.0.0.1:{clients[i]}",
                        "--listen-peer-urls", f"https://127.0.0.1:{peers[i]}",
                        "--initial-advertise-peer-urls", f"https://127.0.0.1:{peers[i]}",
                        "--initial-cluster", cluster, "--initial-cluster-token", "init-test",
                        "--cert-file", f"{m}/server.pem", "--key-file", f"{m}/server-key.pem",
                        "--trusted-ca-file", f"{m}/ca.pem", "--client-cert-auth",
                        "--peer-cert-file", f"{m}/server.pem", "--peer-key-file", f"{m}/server-key.pem",
                        "--peer-trusted-ca-file", f"{m}/ca.pem", "--peer-client-cert-auth"], f"etcd-{i}.log")
        client = clients[0]
        tls, cl = self.path("tls"), f"{et}/client"
        state = "etcd://" + ",".join(f"localhost:{c}" for c in clients) + "/ha"
        cp = self.spawn([ARGS.controlplane, "--data-dir", self.path("cp-ha"), "--state", state,
                         "--etcd-cacert", f"{cl}/ca.pem", "--etcd-cert", f"{cl}/client.pem", "--etcd-key", f"{cl}/client-key.pem",
                         "--keyring-file", self.path("keyring", "keyring"),
                         "--http-addr", f"127.0.0.1:{http}", "--grpc-addr", f"127.0.0.1:{grpc}",
                         "--tls-ca-file", f"{tls}/ca.pem", "--tls-cert-file", f"{tls}/server.pem",
                         "--tls-key-file", f"{tls}/server-key.pem"], "controlplane-ha.log")
        ctx = ssl.create_default_context(cafile=f"{tls}/ca.pem")

        def leads():
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{http}/v1/status/ready", context=ctx, timeout=5) as r:
                    return r.status == 200
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                return False
        try:
            self.wait_for("the control plane to lead on etcd with the init's etcd client certificate",
                          lambda: cp.poll() is None and leads(), timeout=60)
        except AssertionError:
            raise AssertionError(self.read("controlplane-ha.log")[-3000:] + self.read("etcd-0.log")[-2000:])
        endpoint = f"https://localhost:{client}"
        for c in clients:  # every member serves (reads are linearizable: the peers formed a quorum over TLS)
            self.assertTrue(self.etcd_answers(f"https://localhost:{c}", "--cacert", f"{cl}/ca.pem", "--cert",
                                              f"{cl}/client.pem", "--key", f"{cl}/client-key.pem"),
                            f"etcd on {c} refused the control planes' certificate")
        # Refused: plaintext, no certificate, and every certificate of the Mooring CA (a node
        # agent's, the control plane's own server certificate): none of them may read etcd.
        self.assertFalse(self.etcd_answers(f"http://127.0.0.1:{client}"), "etcd answers in plaintext")
        self.assertFalse(self.etcd_answers(endpoint, "--cacert", f"{cl}/ca.pem"), "etcd answers without a certificate")
        self.init_cli("tls", "cert", "create", "-agent", "-node-id", "node-9", "-dir", self.path("agent-9"),
                      "-ca", f"{tls}/ca.pem", "-ca-key", f"{tls}/ca-key.pem")
        for cert, key in ((self.path("agent-9", "agent-node-9.pem"), self.path("agent-9", "agent-node-9-key.pem")),
                          (f"{tls}/server.pem", f"{tls}/server-key.pem")):
            self.assertTrue(os.path.isfile(cert), cert)
            self.openssl_verify(cert)  # a good certificate of the Mooring CA, there to be refused
            self.assertFalse(self.etcd_answers(endpoint, "--cacert", f"{cl}/ca.pem", "--cert", cert, "--key", key),
                             f"etcd answers {cert}, a certificate of the Mooring CA")

    def test_7_kubernetes_ha_secrets_are_made_once_and_apart(self):
        with self.kubernetes("sa-ha") as (fake, k8s):
            args = ["k8s-tls", "-namespace", "mooring", "-dns", "mooring-controlplane", "-etcd-secrets", "mooring-etcd",
                    "-etcd-dns", "mooring-etcd-0.mooring-etcd", "-keyring-secret", "mooring-keyring"]
            self.init(*args, env=k8s)
            self.assertEqual(sorted(fake.secrets), ["mooring-ca", "mooring-controlplane-tls", "mooring-etcd-ca",
                                                    "mooring-etcd-client", "mooring-etcd-member", "mooring-keyring"])
            data = lambda name: fake.secrets[name]["data"]  # noqa: E731
            cp, ca = data("mooring-controlplane-tls"), data("mooring-etcd-ca")
            member, client = data("mooring-etcd-member"), data("mooring-etcd-client")
            self.assertEqual(sorted(ca), self.ETCD_FILES["ca"])
            self.assertEqual(sorted(member), self.ETCD_FILES["member"])  # no CA key where members mount it
            self.assertEqual(sorted(client), self.ETCD_FILES["client"])
            self.assertEqual(member["ca.pem"], ca["ca.pem"])
            self.assertEqual(client["ca.pem"], ca["ca.pem"])
            self.assertNotEqual(ca["ca.pem"], cp["ca.pem"], "etcd's CA must not be the Mooring CA")
            if shutil.which("openssl"):
                d = self.path("k8s-etcd")
                os.makedirs(d)
                for name, text in (("ca.pem", ca["ca.pem"]), ("member.pem", member["server.pem"]),
                                   ("client.pem", client["client.pem"]), ("mooring-ca.pem", cp["ca.pem"])):
                    with open(os.path.join(d, name), "wb") as f:
                        f.write(base64.b64decode(text))
                for cert in ("member.pem", "client.pem"):
                    self.openssl_verify(f"{d}/{cert}", f"{d}/ca.pem")
                    self.assertFalse(self.chains_to(f"{d}/{cert}", f"{d}/mooring-ca.pem")[0], cert)
                self.assertIn("DNS:mooring-etcd-0.mooring-etcd", self.openssl_text(f"{d}/member.pem"))
            keyring = json.loads(base64.b64decode(data("mooring-keyring")["keyring"]))
            self.assertEqual(keyring["Format"], "mooring-keyring/1")
            posts = list(fake.posts)
            again = self.init(*args, env=k8s)
            self.assertEqual(fake.posts, posts, again.stderr)

            # Only the client Secret lost: made again from the kept etcd CA; the members' is kept.
            del fake.secrets["mooring-etcd-client"]
            self.init(*args, env=k8s)
            self.assertEqual(fake.posts, posts + ["mooring-etcd-client"])
            self.assertEqual(data("mooring-etcd-member"), member)
            self.assertEqual(data("mooring-etcd-client")["ca.pem"], ca["ca.pem"])
            self.assertNotEqual(data("mooring-etcd-client")["client.pem"], client["client.pem"])
            # etcd's CA lost while what it signed remains: refused, no new CA.
            del fake.secrets["mooring-etcd-ca"]
            del fake.secrets["mooring-etcd-client"]
            tmp = self.path("k8s-tmp")  # where the step keeps key material while it works
            os.makedirs(tmp)
            lost = self.init(*args, env=dict(k8s, TMPDIR=tmp), check=False)
            self.assertEqual(lost.returncode, 1)
            self.assertIn("mooring-etcd-ca (etcd's CA) is gone", lost.stderr)
            self.assertNotIn("mooring-etcd-ca", fake.secrets)
            self.assertEqual(os.listdir(tmp), [], "the failed step left key material behind")
            # A member Secret without its key: named, and still nothing left behind.
            del fake.secrets["mooring-etcd-member"]["data"]["server-key.pem"]
            broken = self.init(*args, env=dict(k8s, TMPDIR=tmp), check=False)
            self.assertEqual(broken.returncode, 1)
            self.assertIn("Secret mooring/mooring-etcd-member has no key server-key.pem", broken.stderr)
            self.assertEqual(os.listdir(tmp), [], "the failed step left key material behind")


def main():
    global ARGS, SCRIPT
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--controlplane", required=True)
    ap.add_argument("--nodeagent", required=True)
    ap.add_argument("--cli", required=True)
    ARGS, rest = ap.parse_known_args()
    SCRIPT = os.path.join(ARGS.repo, "docker", "mooring-init.sh")
    missing = [p for p in (ARGS.controlplane, ARGS.nodeagent, ARGS.cli) if not os.access(p, os.X_OK)]
    if missing:
        print(f"SKIP: not built: {missing}")
        return 77
    if not shutil.which("curl"):
        print("SKIP: curl is not installed")
        return 77
    result = unittest.main(argv=[sys.argv[0], "-v", *rest], exit=False).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
