#!/usr/bin/env python3
"""Checks docker/ and deploy/kubernetes/ against the code they package.

What is checked (each check says PASS, FAIL or SKIP with the reason):
  - yamllint on the compose file and the manifests (when yamllint is installed)
  - every binary an image or manifest runs is a real CMake target, and each Dockerfile target
    stage copies and starts it
  - every --flag passed to a binary (compose commands, Dockerfile CMDs, Kubernetes args) is listed
    by that binary's --help (when the binary is built; otherwise SKIP)
  - config file keys (docker/agent.json, the ConfigMap, examples/agent.json) are keys the agent's
    --help lists, and plugin entries use known keys
  - ports and addresses agree with the defaults (API 4700, control plane gRPC 4701, agent 4702),
    the health/ready paths exist in the control plane's router, and sockets/mounts line up between
    each agent and its plugin (same socket path, rshared/Bidirectional data dir; compose: the
    capabilities and devices instead of privileged; Kubernetes: privileged, which Bidirectional needs)
  - `docker-compose config` and `kubectl kustomize` accept the files (when installed)
  - nothing runs in plaintext or without ACLs: no --insecure or --acl=false (nor their
    environment or config-file spellings) anywhere; the control plane has its TLS files and the
    CA key for node enrollment, agents theirs from their enrollment (compose: an enroll service;
    Kubernetes: an init container with the node name and the enrollment token from a Secret),
    probes and healthchecks use HTTPS, the CA key reaches no node, and the one-shot init steps
    (docker/mooring-init.sh) are ones the script knows, with options it parses
Exit 0 when nothing failed, 1 on failures, 77 (ctest skip) when nothing could be checked.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:  # python3-yaml is in scripts/install-deps.sh
    print("SKIP: python3-yaml is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)

BINARIES = {
    # binary -> (folder in the build tree, CMakeLists that must declare it)
    "mooring-controlplane": ("services/controlplane", "services/controlplane/CMakeLists.txt"),
    "mooring-nodeagent": ("services/nodeagent", "services/nodeagent/CMakeLists.txt"),
    "mooring-hostpath": ("plugins/hostpath", "plugins/hostpath/CMakeLists.txt"),
    "mooring": ("cli", "cli/CMakeLists.txt"),
}
IMAGE_BINARY = {"controlplane": "mooring-controlplane", "nodeagent": "mooring-nodeagent", "hostpath": "mooring-hostpath"}
# Images of what is not ours: target -> the program (its flags checked against its --help when installed).
OTHER_IMAGES = {"etcd": "etcd"}
DEFAULT_PORTS = {"http": 4700, "controlplane-grpc": 4701, "agent-grpc": 4702}
INIT_SCRIPT = "docker/mooring-init.sh"
INIT_STEPS = {"tls", "acl", "enroll", "k8s-tls", "k8s-acl"}
TLS_FLAGS = ("tls-ca-file", "tls-cert-file", "tls-key-file")
PLUGIN_KEYS = {"id", "type", "command", "args", "env", "socket", "health_timeout", "probe_interval",
               "fingerprint_interval", "stop_timeout"}


class Checker:
    def __init__(self, repo, build, overrides):
        self.repo = repo
        self.build = build
        self.overrides = overrides
        self.passed = 0
        self.failed = []
        self.skipped = []
        self.help_cache = {}

    # ---- reporting ----
    def ok(self, what):
        self.passed += 1
        print(f"PASS: {what}")

    def fail(self, what):
        self.failed.append(what)
        print(f"FAIL: {what}")

    def skip(self, what):
        self.skipped.append(what)
        print(f"SKIP: {what}")

    def expect(self, cond, what):
        (self.ok if cond else self.fail)(what)
        return cond

    def path(self, rel):
        return os.path.join(self.repo, rel)

    def read(self, rel):
        with open(self.path(rel), encoding="utf-8") as f:
            return f.read()

    # ---- binaries ----
    def binary_path(self, name):
        if name in self.overrides:
            return self.overrides[name]
        if name not in BINARIES:
            return shutil.which(name)
        folder = BINARIES[name][0]
        return os.path.join(self.build, folder, name) if self.build else None

    def check_target(self, name):
        if name not in BINARIES:
            return self.fail(f"{name}: not a binary this project builds")
        cmake = BINARIES[name][1]
        text = self.read(cmake) if os.path.exists(self.path(cmake)) else ""
        self.expect(re.search(r"add_executable\(\s*" + re.escape(name) + r"\b", text) is not None,
                    f"{name} is a CMake target ({cmake})")

    def help_flags(self, name):
        """The --long-flags the binary's --help lists, or None when it is not built."""
        if name in self.help_cache:
            return self.help_cache[name]
        flags = None
        exe = self.binary_path(name)
        if exe and os.access(exe, os.X_OK):
            env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
            res = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60, env=env)
            if res.returncode != 0:
                self.fail(f"{name} --help exits {res.returncode}: {res.stderr.strip()[:200]}")
                flags = set()
            else:
                flags = set(re.findall(r"--([a-z][a-z0-9-]*)", res.stdout + res.stderr))
                self.help_cache[name + ":text"] = res.stdout + res.stderr
        else:
            self.skip(f"{name} is not built at {exe}; its flags are not checked")
        self.help_cache[name] = flags
        return flags

    def check_flags(self, name, args, where):
        flags = self.help_flags(name)
        if flags is None:
            return
        used = []
        for a in args:
            if isinstance(a, str) and a.startswith("--"):
                used.append(a[2:].split("=", 1)[0])
        unknown = [f for f in used if f not in flags]
        self.expect(not unknown, f"{where}: flags {sorted(set(used))} accepted by {name} --help"
                    + (f" (unknown: {unknown})" if unknown else ""))

    def agent_file_keys(self):
        text = self.help_cache.get("mooring-nodeagent:text")
        if text is None:
            return None
        return set(re.findall(r'file key "([a-z_]+)"', text))

    def check_agent_config(self, cfg, where):
        if self.help_flags("mooring-nodeagent") is None:
            return
        keys = self.agent_file_keys()
        unknown = [k for k in cfg if k not in keys]
        self.expect(not unknown, f"{where}: keys {sorted(cfg)} are agent config keys"
                    + (f" (unknown: {unknown})" if unknown else ""))
        for p in cfg.get("plugins", []):
            bad = [k for k in p if k not in PLUGIN_KEYS]
            self.expect(not bad and "id" in p and "type" in p and (("command" in p) != ("socket" in p)),
                        f"{where}: plugin {p.get('id')!r} has id, type and exactly one of command/socket"
                        + (f" (unknown keys: {bad})" if bad else ""))

    # ---- helpers ----
    @staticmethod
    def flag_value(args, flag):
        for i, a in enumerate(args):
            if a == "--" + flag and i + 1 < len(args):
                return args[i + 1]
            if a.startswith("--" + flag + "="):
                return a.split("=", 1)[1]
        return None

    @staticmethod
    def port_of(addr):
        return int(addr.rsplit(":", 1)[1]) if addr and ":" in addr else None


def dockerfile_stages(text):
    """target name -> {"entrypoint": [...], "cmd": [...], "copies": [...]}"""
    stages = {}
    cur = None
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        s = line.strip()
        m = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", s, re.I)
        if m:
            cur = stages.setdefault(m.group(1), {"entrypoint": [], "cmd": [], "copies": []})
            continue
        if cur is None:
            continue
        for key in ("ENTRYPOINT", "CMD"):
            if s.upper().startswith(key + " "):
                try:
                    cur[key.lower()] = json.loads(s[len(key) + 1:])
                except json.JSONDecodeError:
                    cur[key.lower()] = s[len(key) + 1:].split()
        if s.upper().startswith("COPY "):
            cur["copies"].append(s)
    return stages


def check_dockerfile(c):
    text = c.read("docker/Dockerfile")
    stages = dockerfile_stages(text)
    c.expect("build" in stages and "install-deps.sh" in text and "CMAKE_BUILD_TYPE=Release" in text,
             "Dockerfile: build stage runs scripts/install-deps.sh and a Release build")
    c.expect(re.search(r"ARG BASE_IMAGE=debian:bookworm\n", text) is not None and
             re.search(r"ARG RUNTIME_BASE_IMAGE=debian:bookworm-slim\n", text) is not None and
             re.search(r"FROM \$\{BASE_IMAGE\} AS build", text) is not None,
             "Dockerfile: based on debian:bookworm (-slim for the images), overridable by BASE_IMAGE, RUNTIME_BASE_IMAGE")
    for target, binary in IMAGE_BINARY.items():
        st = stages.get(target)
        if not c.expect(st is not None, f"Dockerfile has a '{target}' target"):
            continue
        c.check_target(binary)
        c.expect(any(f"/usr/local/bin/{binary}" in cp for cp in st["copies"]) and
                 f"/usr/local/bin/{binary}" in st["entrypoint"],
                 f"Dockerfile '{target}' copies and starts {binary}")
        c.check_flags(binary, st["cmd"], f"Dockerfile '{target}' CMD")
    cp = stages.get("controlplane", {})
    c.expect(re.search(r"FROM runtime AS controlplane[\s\S]*?USER 10001", text) is not None,
             "Dockerfile: the control plane runs as a non-root user")
    c.expect(c.port_of(c.flag_value(cp.get("cmd", []), "http-addr")) == DEFAULT_PORTS["http"] and
             c.port_of(c.flag_value(cp.get("cmd", []), "grpc-addr")) == DEFAULT_PORTS["controlplane-grpc"],
             "Dockerfile: control plane listens on the default ports 4700/4701")
    c.check_target("mooring")
    etcd = stages.get("etcd")
    if c.expect(etcd is not None, "Dockerfile has an 'etcd' target (the HA stacks' etcd)"):
        c.expect("/usr/bin/etcd" in etcd["entrypoint"] and re.search(r"FROM \$\{RUNTIME_BASE_IMAGE\} AS etcd[\s\S]*?"
                                                                     r"apt-get install[^\n]*etcd-server", text) is not None,
                 "Dockerfile 'etcd': Debian's etcd-server, started as its entrypoint")
        c.expect(re.search(r"AS etcd[\s\S]*?USER 10001", text) is not None, "Dockerfile 'etcd': runs as a non-root user")


# ---- nothing in plaintext, nothing without ACLs ----
def plaintext_settings(value, where="", out=None):
    """Every place in a parsed manifest (dicts, lists, strings) that turns TLS or ACLs off:
    --insecure, --acl=false (or "--acl" "false"), MOORING_*INSECURE / MOORING_CP_ACL in an env
    list or map, and "insecure": true / "acl": false in an embedded JSON config."""
    out = [] if out is None else out
    false_words = {"false", "0", "no", "off"}
    if isinstance(value, dict):
        name, val = value.get("name"), value.get("value")
        if isinstance(name, str) and "value" in value:  # a Kubernetes env entry
            check_env(name, val, where, out)
        for k, v in value.items():
            if isinstance(k, str) and k.startswith("MOORING") and not isinstance(v, (dict, list)):
                check_env(k, v, where, out)  # a compose environment map
            if k == "insecure" and v is True:
                out.append(f"{where}: \"insecure\": true")
            if k == "acl" and v is False:
                out.append(f"{where}: \"acl\": false")
            plaintext_settings(v, f"{where}.{k}" if where else str(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if v == "--acl" and i + 1 < len(value) and str(value[i + 1]).lower() in false_words:
                out.append(f"{where}: --acl {value[i + 1]}")
            plaintext_settings(v, f"{where}[{i}]", out)
    elif isinstance(value, str):
        for word in value.split():
            m = re.match(r"^--(insecure|acl)(?:=(.*))?$", word)
            if m and m.group(1) == "insecure" and (m.group(2) or "true").lower() not in false_words:
                out.append(f"{where}: {word}")
            elif m and m.group(1) == "acl" and (m.group(2) or "").lower() in false_words and m.group(2):
                out.append(f"{where}: {word}")
        if value.lstrip().startswith("{"):
            try:
                plaintext_settings(json.loads(value), where, out)
            except json.JSONDecodeError:
                pass
    return out


def check_env(name, val, where, out):
    text = str(val).lower() if val is not None else "true"
    if re.fullmatch(r"MOORING(_CP)?_INSECURE", name) and text not in {"false", "0", "no", "off", ""}:
        out.append(f"{where}: {name}={val}")
    if name == "MOORING_CP_ACL" and text in {"false", "0", "no", "off"}:
        out.append(f"{where}: {name}={val}")


def self_test_plaintext_detection(c):
    """The detector must see each spelling, or the check below proves nothing."""
    bad = [{"command": ["--insecure"]}, {"args": ["--acl=false"]}, {"args": ["--acl", "false"]},
           {"command": "mooring-controlplane --insecure --data-dir x"}, {"CMD": ["--insecure=true"]},
           {"env": [{"name": "MOORING_CP_INSECURE", "value": "1"}]}, {"environment": {"MOORING_INSECURE": "true"}},
           {"env": [{"name": "MOORING_CP_ACL", "value": "false"}]}, {"data": {"agent.json": '{"insecure": true}'}}]
    good = [{"args": ["--acl=true", "--insecure=false", "--tls-ca-file=x"]}, {"command": ["--data-dir", "/x"]}]
    missed = [d for d in bad if not plaintext_settings(d)]
    wrong = [d for d in good if plaintext_settings(d)]
    c.expect(not missed and not wrong, "the plaintext check detects --insecure/--acl=false in every spelling"
             + (f" (missed {missed}, wrongly flagged {wrong})" if missed or wrong else ""))


def check_no_plaintext(c):
    self_test_plaintext_detection(c)
    sources = {"docker/compose.yaml": yaml.safe_load(c.read("docker/compose.yaml"))}
    for kdir in ("deploy/kubernetes", "deploy/kubernetes-ha"):
        for f in sorted(os.listdir(c.path(kdir))):
            if f.endswith(".yaml"):
                sources[f"{kdir}/{f}"] = list(yaml.safe_load_all(c.read(f"{kdir}/{f}")))
    sources["docker/agent.json"] = json.loads(c.read("docker/agent.json"))
    stages = dockerfile_stages(c.read("docker/Dockerfile"))
    sources["docker/Dockerfile"] = {t: {"ENTRYPOINT": st["entrypoint"], "CMD": st["cmd"]} for t, st in stages.items()}
    healthchecks = [ln for ln in c.read("docker/Dockerfile").splitlines() if "curl" in ln and "http://" in ln]
    for where, doc in sources.items():
        found = plaintext_settings(doc, where)
        c.expect(not found, f"{where}: nothing turns TLS or ACLs off" + (f": {found}" if found else ""))
    c.expect(not healthchecks, "Dockerfile: healthchecks use https" + (f": {healthchecks}" if healthchecks else ""))


def check_init_script(c):
    path = c.path(INIT_SCRIPT)
    if not c.expect(os.access(path, os.X_OK), f"{INIT_SCRIPT} exists and is executable"):
        return
    res = subprocess.run(["bash", "-n", path], capture_output=True, text=True, timeout=30)
    c.expect(res.returncode == 0, f"bash -n {INIT_SCRIPT}" + (f": {res.stderr}" if res.returncode else ""))
    sc = shutil.which("shellcheck")
    if sc:
        res = subprocess.run([sc, path], capture_output=True, text=True, timeout=60)
        c.expect(res.returncode == 0, f"shellcheck {INIT_SCRIPT}" + (f":\n{res.stdout}" if res.returncode else ""))
    else:
        c.skip("shellcheck is not installed")
    c.expect(re.search(r"COPY docker/mooring-init\.sh /usr/local/bin/mooring-init\.sh", c.read("docker/Dockerfile"))
             is not None, "Dockerfile: the runtime image carries /usr/local/bin/mooring-init.sh")


def init_options():
    """The options mooring-init.sh parses (its parse_options case labels)."""
    text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", INIT_SCRIPT)).read()
    block = text[text.index("parse_options() {"):]
    block = block[:block.index("\n}\n")]
    return set(re.findall(r"^\s+-([a-z][a-z-]*)\)", block, re.M))


def init_step(entrypoint, command):
    """(step, {option: [values]}) when a container runs mooring-init.sh, else None."""
    argv = list(entrypoint or []) + list(command or [])
    idx = next((i for i, a in enumerate(argv) if str(a).endswith("/mooring-init.sh")), None)
    if idx is None or idx + 1 >= len(argv):
        return None
    opts = {}
    rest = argv[idx + 2:]
    for i in range(0, len(rest) - 1, 2):
        opts.setdefault(str(rest[i]).lstrip("-"), []).append(str(rest[i + 1]))
    return argv[idx + 1], opts, rest


def check_init_use(c, where, step, opts, rest):
    known = init_options()
    c.expect(step in INIT_STEPS, f"{where}: mooring-init.sh step {step!r} is one the script has")
    c.expect(len(rest) % 2 == 0 and all(str(a).startswith("-") for a in rest[::2]) and set(opts) <= known,
             f"{where}: mooring-init.sh options {sorted(opts)} are ones it parses" +
             (f" (unknown: {sorted(set(opts) - known)})" if set(opts) - known else ""))


def check_routes(c):
    api = c.read("services/controlplane/api/routes.cpp")
    for path in ("/v1/status/health", "/v1/status/ready"):
        c.expect(f'"{path}"' in api, f"control plane router serves {path}")


def compose_services(c):
    """The compose file's services: (the default stack, the `ha` profile's)."""
    services = yaml.safe_load(c.read("docker/compose.yaml")).get("services", {})
    default = {n: s for n, s in services.items() if not s.get("profiles")}
    ha = {n: s for n, s in services.items() if "ha" in (s.get("profiles") or [])}
    return default, ha


def check_compose(c):
    default, ha = compose_services(c)
    check_compose_stack(c, default, "compose", controlplanes=1, min_agents=2)
    if c.expect(ha, "compose: an ha profile"):
        check_compose_stack(c, ha, "compose --profile ha", controlplanes=3, min_agents=1)
        check_compose_ha(c, ha)
    dc = shutil.which("docker-compose")
    if dc:
        for extra in ([], ["--profile", "ha"]):
            res = subprocess.run([dc, "-f", c.path("docker/compose.yaml")] + extra + ["config", "-q"],
                                 capture_output=True, text=True, timeout=60)
            c.expect(res.returncode == 0, f"docker-compose {' '.join(extra)} config validates docker/compose.yaml"
                     + (f": {res.stderr.strip()}" if res.returncode else ""))
    else:
        c.skip("docker-compose is not installed; compose schema not validated")


def etcd_members_check(c, label, members, tls_names):
    """etcd members (name -> their args): TLS on both listeners with client certificates required,
    every member in --initial-cluster by the name others dial, and a certificate for that name.
    Returns the client endpoints ("name:2379")."""
    endpoints = []
    for name, args in members.items():
        member = c.flag_value(args, "name")
        urls = {f: c.flag_value(args, f) or "" for f in ("listen-client-urls", "advertise-client-urls",
                                                         "listen-peer-urls", "initial-advertise-peer-urls")}
        c.expect(all(u.startswith("https://") for u in urls.values()),
                 f"{label} {name}: etcd listens for clients and peers over TLS only ({urls})")
        c.expect(all(f in args for f in ("--client-cert-auth", "--peer-client-cert-auth")) and
                 all(c.flag_value(args, f) for f in ("cert-file", "key-file", "trusted-ca-file", "peer-cert-file",
                                                     "peer-key-file", "peer-trusted-ca-file")),
                 f"{label} {name}: etcd requires client certificates of clients and peers, with its TLS files")
        cluster = dict(x.split("=", 1) for x in (c.flag_value(args, "initial-cluster") or "").split(",") if "=" in x)
        c.expect(len(cluster) == len(members) and cluster.get(member) == urls["initial-advertise-peer-urls"],
                 f"{label} {name}: --initial-cluster lists the {len(members)} members, this one as it advertises itself")
        host = urls["advertise-client-urls"].split("://", 1)[-1].rsplit(":", 1)[0]
        c.expect(host in tls_names, f"{label} {name}: etcd's certificate names {host}, the host clients dial")
        endpoints.append(urls["advertise-client-urls"].split("://", 1)[-1])
    return endpoints


def controlplane_ha_check(c, label, name, args, etcd_endpoints, advertised_host, files):
    """A control plane of an HA stack: etcd state on every member over TLS, the leader lease, the
    addresses it advertises, and the shared keyring. `files(path)` tells where a file comes from."""
    state = c.flag_value(args, "state") or ""
    c.expect(state.startswith("etcd://") and
             sorted(state[len("etcd://"):].split("/", 1)[0].split(",")) == sorted(etcd_endpoints),
             f"{label} {name}: --state {state} is etcd with every member's client endpoint")
    c.expect(all(c.flag_value(args, f) for f in ("etcd-cacert", "etcd-cert", "etcd-key", "leader-lease")),
             f"{label} {name}: TLS to etcd (--etcd-cacert/--etcd-cert/--etcd-key) and --leader-lease")
    http = c.flag_value(args, "advertise-http-addr") or ""
    grpc = c.flag_value(args, "advertise-grpc-addr") or ""
    c.expect(http == f"https://{advertised_host}:{DEFAULT_PORTS['http']}" and
             grpc == f"{advertised_host}:{DEFAULT_PORTS['controlplane-grpc']}",
             f"{label} {name}: advertises https://{advertised_host}:4700 and {advertised_host}:4701 ({http}, {grpc})")
    keyring = c.flag_value(args, "keyring-file") or ""
    c.expect(files(keyring) is not None, f"{label} {name}: --keyring-file {keyring} is the one the init makes"
             + f" ({files(keyring)})")
    return files(keyring)


def check_compose_ha(c, services):
    label = "compose --profile ha"

    def mounts_of(svc):
        out = {}
        for v in svc.get("volumes", []):
            parts = v.split(":") if isinstance(v, str) else [v.get("source"), v["target"]]
            out[parts[1]] = parts[0]
        return out

    def volume_of(svc, path):
        best = None
        for target, source in mounts_of(svc).items():
            if path == target or path.startswith(target.rstrip("/") + "/"):
                if not best or len(target) > len(best[0]):
                    best = (target, source)
        return best[1] if best else None

    image = lambda svc: (svc.get("build") or {}).get("target") or svc.get("image", "").split("/")[-1].split(":")[0]  # noqa: E731
    tls = next(((n, init_step(s.get("entrypoint"), s.get("command"))) for n, s in services.items()
                if (init_step(s.get("entrypoint"), s.get("command")) or [None])[0] == "tls"), None)
    if not c.expect(tls is not None, f"{label}: a tls init service"):
        return
    tls_name, (_, opts, _) = tls
    etcds = {n: s.get("command", []) for n, s in services.items() if image(s) == "etcd"}
    cps = {n: s for n, s in services.items() if image(s) == "controlplane" and n != tls_name and
           not init_step(s.get("entrypoint"), s.get("command"))}
    c.expect(len(etcds) == 3, f"{label}: three etcd members ({sorted(etcds)})")
    # etcd's TLS (mooring-init.sh step_etcd_tls): etcd-dir/ca (etcd's own CA, its key), member/,
    # client/, each its own volume, so each service mounts only its part.
    etcd_dir = opts.get("etcd-dir", [""])[0]
    etcd_vols = {part: volume_of(services[tls_name], f"{etcd_dir}/{part}/{f}") if etcd_dir else None
                 for part, f in (("ca", "ca-key.pem"), ("member", "server.pem"), ("client", "client.pem"))}
    mooring_tls = volume_of(services[tls_name], opts.get("dir", [""])[0] + "/ca-key.pem")
    c.expect(None not in etcd_vols.values() and len(set(etcd_vols.values()) | {mooring_tls}) == 4,
             f"{label}: {tls_name} keeps etcd's CA, the members' and the control planes' etcd files in volumes of "
             f"their own, apart from the Mooring CA's ({etcd_vols}, {mooring_tls})")
    c.expect(all(etcd_vols["ca"] not in mounts_of(svc).values() for n, svc in services.items() if n != tls_name),
             f"{label}: etcd's CA (volume {etcd_vols['ca']}) is mounted by {tls_name} alone")
    for name, args in etcds.items():
        files = [c.flag_value(args, f) for f in ("cert-file", "key-file", "trusted-ca-file", "peer-cert-file",
                                                 "peer-key-file", "peer-trusted-ca-file")]
        c.expect(etcd_vols["member"] is not None and all(f and volume_of(services[name], f) == etcd_vols["member"] for f in files)
                 and [os.path.basename(f or "") for f in files] == ["server.pem", "server-key.pem", "ca.pem"] * 2,
                 f"{label} {name}: its TLS files, trusted CA included, are the members' ones {tls_name} makes with "
                 f"-etcd-dir (volume {etcd_vols['member']})")
        c.expect(not {etcd_vols["client"], mooring_tls} & set(mounts_of(services[name]).values()),
                 f"{label} {name}: mounts neither the control planes' etcd client files nor the Mooring CA")
        deps = services[name].get("depends_on") or {}
        c.expect(deps.get(tls_name, {}).get("condition") == "service_completed_successfully",
                 f"{label} {name}: starts after {tls_name} completed")
    endpoints = etcd_members_check(c, label, etcds, set(opts.get("etcd-dns", [])))
    keyring_volume = volume_of(services[tls_name], opts.get("keyring", [""])[0])
    keyrings = set()
    for name, svc in cps.items():
        args = svc.get("command", [])
        keyrings.add(controlplane_ha_check(
            c, label, name, args, endpoints, name,
            lambda path, svc=svc: volume_of(svc, path) if path and volume_of(svc, path) == keyring_volume and
            os.path.basename(path) == os.path.basename(opts.get("keyring", [""])[0]) else None))
        c.expect(name in opts.get("dns", []), f"{label}: the control planes' certificate ({tls_name} -dns) names {name}")
        files = [c.flag_value(args, f) or "" for f in ("etcd-cacert", "etcd-cert", "etcd-key")]
        c.expect(etcd_vols["client"] is not None and all(volume_of(svc, f) == etcd_vols["client"] for f in files) and
                 [os.path.basename(f) for f in files] == ["ca.pem", "client.pem", "client-key.pem"],
                 f"{label} {name}: --etcd-cacert/--etcd-cert/--etcd-key {files} are etcd's CA and the client "
                 f"certificate {tls_name} makes for the control planes (volume {etcd_vols['client']})")
        c.expect(etcd_vols["member"] not in mounts_of(svc).values(), f"{label} {name}: does not mount etcd's member files")
        data = volume_of(svc, c.flag_value(args, "data-dir") or "")
        c.expect(data is not None and all(volume_of(o, c.flag_value(o.get("command", []), "data-dir") or "") != data
                                          for n, o in cps.items() if n != name),
                 f"{label} {name}: a data volume of its own ({data})")
    c.expect(len(keyrings) == 1 and None not in keyrings, f"{label}: the control planes share one keyring ({keyrings})")


def check_compose_stack(c, services, label, controlplanes, min_agents):
    """One stack of the compose file (the default one, or a profile's) on its own: its images,
    flags, init steps, TLS files and each agent's plugin."""
    by_target = {}
    inits = {}
    for name, svc in services.items():
        target = (svc.get("build") or {}).get("target") or svc.get("image", "").split("/")[-1].split(":")[0]
        if not c.expect(target in IMAGE_BINARY or target in OTHER_IMAGES,
                        f"{label} service {name} runs a known image ({target})"):
            continue
        step = init_step(svc.get("entrypoint"), svc.get("command"))
        if step:
            inits[name] = (target, *step)
            check_init_use(c, f"{label} service {name}", *step)
            c.expect(svc.get("restart") in ("no", None), f"{label} service {name}: a one-shot init (restart: no)")
            continue
        by_target.setdefault(target, []).append(name)
        c.check_flags(IMAGE_BINARY.get(target) or OTHER_IMAGES[target], svc.get("command", []), f"{label} service {name}")
    c.expect(len(by_target.get("controlplane", [])) == controlplanes, f"{label}: {controlplanes} control plane(s)")
    c.expect(len(by_target.get("nodeagent", [])) >= min_agents, f"{label}: at least {min_agents} node agent(s)")
    c.expect(len(by_target.get("hostpath", [])) >= 1, f"{label}: hostpath plugin containers")

    cp_names = by_target.get("controlplane", [])
    for cp_name in cp_names:
        cp = services[cp_name]
        cmd = cp.get("command", [])
        http_port = c.port_of(c.flag_value(cmd, "http-addr"))
        grpc_port = c.port_of(c.flag_value(cmd, "grpc-addr"))
        c.expect(http_port == DEFAULT_PORTS["http"] and grpc_port == DEFAULT_PORTS["controlplane-grpc"],
                 f"{label}: {cp_name} on the default ports (http {http_port}, grpc {grpc_port})")
        c.expect(any(str(p).startswith("127.0.0.1:") and str(p).endswith(f":{http_port}") for p in cp.get("ports", [])),
                 f"{label}: {cp_name}'s API is published on 127.0.0.1 only")
        hc = " ".join(cp.get("healthcheck", {}).get("test", []))
        c.expect(f"https://127.0.0.1:{http_port}/v1/status/health" in hc and "--cacert" in hc,
                 f"{label}: {cp_name} healthcheck is GET https://…/v1/status/health checked against the CA")
    # The published port is 4700 unless MOORING_COMPOSE_API_PORT moves it (make compose-test does).
    c.expect(controlplanes > 1 or any(str(p) == "127.0.0.1:${MOORING_COMPOSE_API_PORT:-4700}:4700" for n in cp_names
                                      for p in services[n].get("ports", [])), f"{label}: the API is published on 4700")
    cp_name = cp_names[0] if cp_names else None
    cp = services.get(cp_name, {})
    cmd = cp.get("command", [])
    http_port = c.port_of(c.flag_value(cmd, "http-addr"))
    grpc_port = c.port_of(c.flag_value(cmd, "grpc-addr"))

    # TLS: the init steps, the control plane's files, each agent's enrollment.
    def mounts_of(svc):
        out = {}
        for v in svc.get("volumes", []):
            if isinstance(v, str):
                parts = v.split(":")
                out[parts[1]] = parts[0]
            else:
                out[v["target"]] = v.get("source")
        return out

    def volume_of(svc, path):
        """The volume (or bind source) a file path lives in, by the longest mount prefix."""
        best = None
        for target, source in mounts_of(svc).items():
            if (path == target or path.startswith(target.rstrip("/") + "/")) and (not best or len(target) > len(best[0])):
                best = (target, source)
        return best[1] if best else None

    tls_inits = [(n, i) for n, i in inits.items() if i[1] == "tls"]
    acl_inits = [(n, i) for n, i in inits.items() if i[1] == "acl"]
    c.expect(len(tls_inits) == 1 and len(acl_inits) == 1, f"{label}: one tls and one acl init service")
    for name in cp_names:
        ccmd = services[name].get("command", [])
        for flag in TLS_FLAGS + ("tls-ca-key-file",):
            c.expect(c.flag_value(ccmd, flag) is not None, f"{label}: {name} has --{flag}")
    if tls_inits:
        tls_name, (_, _, tls_opts, _) = tls_inits[0]
        tls_dir = tls_opts.get("dir", [""])[0]
        key_volume = volume_of(services[tls_name], tls_dir + "/ca-key.pem")
        for name in cp_names:
            ccmd, deps = services[name].get("command", []), services[name].get("depends_on") or {}
            c.expect(c.flag_value(ccmd, "tls-ca-key-file") == tls_dir + "/ca-key.pem" and
                     volume_of(services[name], c.flag_value(ccmd, "tls-ca-key-file") or "") == key_volume,
                     f"{label}: {name}'s CA key is the one {tls_name} makes (volume {key_volume})")
            c.expect(isinstance(deps, dict) and deps.get(tls_name, {}).get("condition") == "service_completed_successfully",
                     f"{label}: {name} starts after {tls_name} completed")
        holders = [n for n, svc in services.items()
                   if key_volume in mounts_of(svc).values() and n not in cp_names + [tls_name]]
        c.expect(not holders, f"{label}: the CA key's volume {key_volume} is mounted by the control plane(s) and "
                 f"{tls_name} only" + (f" (also: {holders})" if holders else ""))
    if acl_inits:
        acl_name, (_, _, acl_opts, _) = acl_inits[0]
        adeps = services[acl_name].get("depends_on") or {}
        target = next((n for n in cp_names if acl_opts.get("addr", [""])[0] == f"https://{n}:{http_port}"), None)
        c.expect(target is not None and adeps.get(target, {}).get("condition") == "service_healthy",
                 f"{label}: {acl_name} bootstraps ACLs at {acl_opts.get('addr')} (a control plane) once it is healthy")
    for agent_name in by_target.get("nodeagent", []):
        agent = services[agent_name]
        acmd = agent.get("command", [])
        node_id = c.flag_value(acmd, "node-id")
        adeps = agent.get("depends_on") or {}
        enrolls = [n for n in adeps if n in inits and inits[n][1] == "enroll"]
        if not c.expect(len(enrolls) == 1 and adeps[enrolls[0]].get("condition") == "service_completed_successfully",
                        f"{label} {agent_name}: starts after its enroll service completed"):
            continue
        _, _, eopts, _ = inits[enrolls[0]]
        edir = eopts.get("dir", [""])[0]
        c.expect(eopts.get("node-id", [None])[0] == node_id,
                 f"{label} {enrolls[0]}: enrolls node {node_id}, the node id {agent_name} runs with")
        expected = {"tls-ca-file": f"{edir}/ca.pem", "tls-cert-file": f"{edir}/agent-{node_id}.pem",
                    "tls-key-file": f"{edir}/agent-{node_id}-key.pem"}
        c.expect(all(c.flag_value(acmd, f) == p and volume_of(agent, p) == volume_of(services[enrolls[0]], p)
                     for f, p in expected.items()),
                 f"{label} {agent_name}: its TLS files are the ones {enrolls[0]} writes ({edir})")

    agent_cfg = json.loads(c.read("docker/agent.json"))
    c.check_agent_config(agent_cfg, "docker/agent.json")
    for agent_name in by_target.get("nodeagent", []):
        # The flag overrides the file: every control plane of the stack, at its gRPC port.
        addrs = c.flag_value(services[agent_name].get("command", []), "controlplane-addr") or agent_cfg.get("controlplane_addr", "")
        c.expect(sorted(addrs.split(",")) == sorted(f"{n}:{grpc_port}" for n in cp_names),
                 f"{label} {agent_name}: control plane address(es) {addrs} are the stack's control plane service(s)")
    sockets = [p["socket"] for p in agent_cfg.get("plugins", []) if "socket" in p]
    c.expect(len(sockets) == 1, "docker/agent.json: the plugin is an external socket (sidecar container)")
    socket = sockets[0] if sockets else ""

    def mounts(svc):
        out = {}
        for v in svc.get("volumes", []):
            if isinstance(v, str):
                parts = v.split(":")
                out[parts[1]] = {"source": parts[0], "propagation": None}
            else:
                out[v["target"]] = {"source": v.get("source"), "propagation": (v.get("bind") or {}).get("propagation")}
        return out

    for agent_name in by_target.get("nodeagent", []):
        agent = services[agent_name]
        acmd = agent.get("command", [])
        check_agent_rights(c, f"{label} {agent_name}", agent)
        c.expect(c.port_of(c.flag_value(acmd, "grpc-addr")) == DEFAULT_PORTS["agent-grpc"],
                 f"{label} {agent_name}: agent gRPC on the default port 4702")
        cfg_path = c.flag_value(acmd, "config")
        am = mounts(agent)
        c.expect(cfg_path is not None and any(cfg_path == t and m["source"].endswith("agent.json") for t, m in am.items()),
                 f"{label} {agent_name}: --config {cfg_path} is the mounted docker/agent.json")
        data_dir = c.flag_value(acmd, "data-dir") or agent_cfg.get("data_dir")
        deps = list((agent.get("depends_on") or {}).keys()) if isinstance(agent.get("depends_on"), dict) else agent.get("depends_on", [])
        plugins = [d for d in deps if d in by_target.get("hostpath", [])]
        if not c.expect(len(plugins) == 1, f"{label} {agent_name}: depends on its own hostpath plugin"):
            continue
        plugin = services[plugins[0]]
        pm = mounts(plugin)
        check_plugin_rights(c, f"{label} {plugins[0]}", plugin)
        endpoint = c.flag_value(plugin.get("command", []), "endpoint")
        c.expect(endpoint == "unix://" + socket, f"{label} {plugins[0]}: --endpoint {endpoint} is the agent's plugin socket")
        sock_dir = os.path.dirname(socket)
        c.expect(sock_dir in am and sock_dir in pm and am[sock_dir]["source"] == pm[sock_dir]["source"],
                 f"{label} {agent_name}/{plugins[0]}: share the socket directory {sock_dir}")
        c.expect(data_dir in am and data_dir in pm and am[data_dir]["source"] == pm[data_dir]["source"] and
                 am[data_dir]["propagation"] == "rshared" and pm[data_dir]["propagation"] == "rshared",
                 f"{label} {agent_name}/{plugins[0]}: share the agent data dir {data_dir} with rshared propagation")


LOOP_BLOCK_RULE = "b 7:* rmw"  # /dev/loopN: block major 7


def check_plugin_rights(c, where, svc):
    """Not privileged (which fails where dockerd's root lacks CAP_SYS_RESOURCE): mount(2) through
    CAP_SYS_ADMIN, AppArmor's mount denial lifted, loop devices for block volumes."""
    c.expect(not svc.get("privileged"), f"{where}: not privileged")
    c.expect("SYS_ADMIN" in (svc.get("cap_add") or []), f"{where}: CAP_SYS_ADMIN for its bind mounts")
    c.expect(any(o in ("apparmor=unconfined", "apparmor:unconfined") for o in svc.get("security_opt") or []),
             f"{where}: AppArmor unconfined (docker-default denies mount)")
    c.expect(any(d.split(":")[0] == "/dev/loop-control" for d in svc.get("devices") or []) and
             LOOP_BLOCK_RULE in (svc.get("device_cgroup_rules") or []),
             f"{where}: /dev/loop-control and the loop devices' cgroup rule (block volumes)")
    c.expect("seccomp=unconfined" not in (svc.get("security_opt") or []) and "ALL" not in (svc.get("cap_add") or []),
             f"{where}: seccomp on, no blanket capabilities")


def check_agent_rights(c, where, svc):
    """Not privileged; what a walled task's start needs (namespaces, pivot_root, open_tree and
    move_mount: CAP_SYS_ADMIN, AppArmor and seccomp unconfined) and its cgroup (the host's cgroup
    tree read-write: Docker mounts it read-only). `make compose-test` found each missing one."""
    c.expect(not svc.get("privileged"), f"{where}: not privileged")
    c.expect((svc.get("cap_add") or []) == ["SYS_ADMIN"], f"{where}: CAP_SYS_ADMIN only, for the tasks' walls")
    opts = svc.get("security_opt") or []
    c.expect("apparmor=unconfined" in opts and "seccomp=unconfined" in opts,
             f"{where}: AppArmor and seccomp unconfined (pivot_root, open_tree, move_mount for the walls)")
    binds = [v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}" for v in svc.get("volumes") or []]
    c.expect(any(b.split(":")[:2] == ["/sys/fs/cgroup", "/sys/fs/cgroup"] and not b.endswith(":ro") for b in binds),
             f"{where}: /sys/fs/cgroup bound read-write (the tasks' cgroups)")
    c.expect(LOOP_BLOCK_RULE in (svc.get("device_cgroup_rules") or []),
             f"{where}: the loop devices' cgroup rule (tasks on block volumes)")


def check_kubernetes_tls(c, docs, cp, ds, label):
    """TLS and ACLs in the manifests: Secrets, the init Job, the enroll init container, HTTPS."""
    find = lambda kind: [d for d in docs if d["kind"] == kind]  # noqa: E731
    jobs = find("Job")
    steps = {}
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        for ctr in pod.get("initContainers", []) + pod.get("containers", []):
            st = init_step(ctr.get("command"), ctr.get("args"))
            if st:
                steps[st[0]] = (job, ctr, st)
                check_init_use(c, f"Job {job['metadata']['name']} container {ctr['name']}", *st)
    c.expect("k8s-tls" in steps and "k8s-acl" in steps, f"{label}: a Job runs the k8s-tls and k8s-acl init steps")
    if "k8s-tls" in steps:
        job, _, _ = steps["k8s-tls"]
        sa = job["spec"]["template"]["spec"].get("serviceAccountName")
        roles = {r["metadata"]["name"]: r for r in find("Role")}
        binding = next((b for b in find("RoleBinding") if any(s.get("name") == sa for s in b.get("subjects", []))), None)
        rules = roles.get((binding or {}).get("roleRef", {}).get("name"), {}).get("rules", [])
        verbs = {v for r in rules if "secrets" in r.get("resources", []) for v in r.get("verbs", [])}
        c.expect(verbs == {"get", "create"}, f"{label}: the init Job's service account {sa} may get and create "
                 f"Secrets, nothing more (has {sorted(verbs)})")

    def secret_volumes(pod):
        return {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}

    pod = cp["spec"]["template"]["spec"]
    ctr = next(x for x in pod["containers"] if x["image"].split("/")[-1].startswith("controlplane"))
    svols = secret_volumes(pod)
    mounts = {m["mountPath"]: m["name"] for m in ctr.get("volumeMounts", [])}
    for flag in TLS_FLAGS + ("tls-ca-key-file",):
        path = c.flag_value(ctr.get("args", []), flag) or ""
        c.expect(svols.get(mounts.get(os.path.dirname(path))) == "mooring-controlplane-tls",
                 f"{label}: control plane --{flag} {path} comes from Secret mooring-controlplane-tls")
    for probe in ("livenessProbe", "readinessProbe"):
        c.expect(ctr.get(probe, {}).get("httpGet", {}).get("scheme") == "HTTPS",
                 f"{label}: control plane {probe} uses HTTPS")
    for flag in ("http-addr", "grpc-addr"):
        addr = c.flag_value(ctr.get("args", []), flag) or ""
        c.expect(not addr.startswith("0.0.0.0") and not addr.startswith(":"),
                 f"{label}: control plane --{flag} {addr} is not a wildcard address")

    pod = ds["spec"]["template"]["spec"]
    svols = secret_volumes(pod)
    enroll = [(x, init_step(x.get("command"), x.get("args"))) for x in pod.get("initContainers", [])]
    enroll = [(x, st) for x, st in enroll if st and st[0] == "enroll"]
    if not c.expect(len(enroll) == 1, f"{label}: the DaemonSet enrolls its node in an init container"):
        return
    ectr, (_, eopts, rest) = enroll[0]
    check_init_use(c, "DaemonSet init container " + ectr["name"], "enroll", eopts, rest)
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in ectr.get("env", [])}
    node_ref = eopts.get("node-id", [""])[0]
    c.expect(node_ref.startswith("$(") and env.get(node_ref[2:-1]) == "spec.nodeName",
             f"{label}: the node enrolls as {node_ref}, its spec.nodeName (downward API)")
    emounts = {m["mountPath"]: m["name"] for m in ectr.get("volumeMounts", [])}
    token_dir = os.path.dirname(eopts.get("token-file", [""])[0])
    ca_dir = os.path.dirname(eopts.get("ca-cert", [""])[0])
    c.expect(svols.get(emounts.get(token_dir)) == "mooring-enroll-token" and
             svols.get(emounts.get(ca_dir)) == "mooring-ca",
             f"{label}: the enrollment token and the CA certificate come from Secrets mooring-enroll-token, mooring-ca")
    c.expect("mooring-controlplane-tls" not in svols.values(), f"{label}: the CA key's Secret is not on the nodes")
    agent = next(x for x in pod["containers"] if x["image"].split("/")[-1].startswith("nodeagent"))
    amounts = {m["mountPath"]: m["name"] for m in agent.get("volumeMounts", [])}
    edir = eopts.get("dir", [""])[0]
    node_id = c.flag_value(agent.get("args", []), "node-id")
    expected = {"tls-ca-file": f"{edir}/ca.pem", "tls-cert-file": f"{edir}/agent-{node_id}.pem",
                "tls-key-file": f"{edir}/agent-{node_id}-key.pem"}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    c.expect(all(c.flag_value(agent.get("args", []), f) == p for f, p in expected.items()) and
             amounts.get(edir) == emounts.get(edir) and "hostPath" in vols.get(amounts.get(edir), {}),
             f"{label}: the agent's TLS files are the ones the enroll init container writes ({edir}, a hostPath "
             "kept across pod restarts so a renewal keeps the key)")


# Strategic merge patches, for the subset the overlays use (lists of named items merged by their
# key, `$patch: delete` of an item or a whole object, other lists replaced), so the overlays are
# checked without kubectl; where kubectl is installed its build is compared with this one.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "volumes": "name", "env": "name",
              "volumeMounts": "mountPath", "ports": "containerPort"}


def strategic_merge(base, patch, key=None):
    if isinstance(base, list) and isinstance(patch, list) and key in MERGE_KEYS:
        mk, out = MERGE_KEYS[key], list(base)
        for item in patch:
            idx = next((i for i, b in enumerate(out) if b.get(mk) == item.get(mk)), None)
            if item.get("$patch") == "delete":
                if idx is not None:
                    del out[idx]
            elif idx is None:
                out.append(item)
            else:
                out[idx] = strategic_merge(out[idx], item)
        return out
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if k != "$patch":
                out[k] = strategic_merge(out[k], v, k) if k in out else v
        return out
    return patch


def kustomize(c, kdir, label):
    """The objects `kubectl kustomize kdir` makes, by our own reading (resources: files and
    directories with a kustomization; patches: strategic merge)."""
    kust = yaml.safe_load(c.read(f"{kdir}/kustomization.yaml"))
    docs = []
    for res in kust.get("resources", []):
        path = os.path.normpath(f"{kdir}/{res}")
        if not c.expect(os.path.exists(c.path(path)), f"{label}: kustomization resource {res} exists"):
            continue
        if os.path.isdir(c.path(path)):
            docs += kustomize(c, path, label)
            continue
        for d in yaml.safe_load_all(c.read(path)):
            if d:
                c.expect(all(k in d for k in ("apiVersion", "kind", "metadata")) and "name" in d["metadata"],
                         f"{res}: {d.get('kind')} {d.get('metadata', {}).get('name')} has apiVersion, kind, metadata.name")
                docs.append(d)
    for patch in kust.get("patches", []):
        for p in yaml.safe_load_all(c.read(f"{kdir}/{patch['path']}")):
            ident = (p.get("kind"), p.get("metadata", {}).get("name"))
            idx = next((i for i, d in enumerate(docs) if (d["kind"], d["metadata"]["name"]) == ident), None)
            if not c.expect(idx is not None, f"{label}: patch {patch['path']} changes {ident[0]} {ident[1]}, which exists"):
                continue
            if p.get("$patch") == "delete":
                del docs[idx]
            else:
                docs[idx] = strategic_merge(docs[idx], p)
    return docs


def kubectl_build(c, kdir, label, docs):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return c.skip(f"kubectl is not installed; {kdir} not built with kustomize")
    res = subprocess.run([kubectl, "kustomize", c.path(kdir)], capture_output=True, text=True, timeout=60)
    if not c.expect(res.returncode == 0, f"kubectl kustomize builds {kdir}" + (f": {res.stderr.strip()}" if res.returncode else "")):
        return
    built = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(res.stdout) if d}
    ours = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    c.expect(sorted(built) == sorted(ours), f"{label}: kubectl kustomize makes the objects this check read"
             + (f" (kubectl: {sorted(set(built) - set(ours))}, here: {sorted(set(ours) - set(built))})"
                if sorted(built) != sorted(ours) else ""))

    def pods(objs):
        return {k: [(x["name"], x.get("args"), sorted(m["mountPath"] for m in x.get("volumeMounts", [])))
                    for x in o["spec"]["template"]["spec"].get("initContainers", []) + o["spec"]["template"]["spec"]["containers"]]
                for k, o in objs.items() if "template" in o.get("spec", {})}
    c.expect(pods(built) == pods(ours), f"{label}: every container's args and mounts are as kubectl kustomize makes them")


# mooring-init.sh k8s-tls -etcd-secrets PREFIX makes PREFIX-ca (etcd's CA, with its key: no pod
# mounts it), PREFIX-member (the etcd members') and PREFIX-client (the control planes').
ETCD_SECRET_PARTS = ("ca", "member", "client")


def made_secrets(docs):
    """The Secrets the init Job makes (the fixed four and those its tls step is told to make)."""
    out = {"mooring-controlplane-tls", "mooring-ca", "mooring-bootstrap-token", "mooring-enroll-token"}
    for job in (d for d in docs if d["kind"] == "Job"):
        pod = job["spec"]["template"]["spec"]
        for ctr in pod.get("initContainers", []) + pod.get("containers", []):
            st = init_step(ctr.get("command"), ctr.get("args"))
            if st:
                out.update(st[1].get("keyring-secret", []))
                out.update(f"{p}-{part}" for p in st[1].get("etcd-secrets", []) for part in ETCD_SECRET_PARTS)
    return out


def check_references(c, docs, label):
    """Every Secret and ConfigMap a pod uses is made by the init Job or shipped, and the Job's
    service account may read each Secret it makes (its Role's resourceNames)."""
    shipped = {(d["kind"], d["metadata"]["name"]) for d in docs}
    made = made_secrets(docs)
    for d in docs:
        spec = d.get("spec", {}).get("template", {}).get("spec")
        if not spec:
            continue
        refs = set()
        for v in spec.get("volumes", []):
            if "secret" in v:
                refs.add(("Secret", v["secret"]["secretName"]))
            if "configMap" in v:
                refs.add(("ConfigMap", v["configMap"]["name"]))
        for ctr in spec.get("initContainers", []) + spec.get("containers", []):
            for e in ctr.get("env", []):
                vf = e.get("valueFrom", {})
                if "secretKeyRef" in vf:
                    refs.add(("Secret", vf["secretKeyRef"]["name"]))
                if "configMapKeyRef" in vf:
                    refs.add(("ConfigMap", vf["configMapKeyRef"]["name"]))
        missing = sorted(f"{k} {n}" for k, n in refs if (k, n) not in shipped and not (k == "Secret" and n in made))
        c.expect(not missing, f"{label}: {d['kind']} {d['metadata']['name']} uses only Secrets/ConfigMaps the init makes or "
                 "the manifests ship" + (f" (missing: {missing})" if missing else ""))
    names = {n for r in (d for d in docs if d["kind"] == "Role") for rule in r.get("rules", [])
             if "get" in rule.get("verbs", []) for n in rule.get("resourceNames", [])}
    c.expect(made <= names, f"{label}: the init Job may read back every Secret it makes"
             + (f" (not: {sorted(made - names)})" if not made <= names else ""))


def check_kubernetes(c):
    docs = kustomize(c, "deploy/kubernetes", "kubernetes")
    check_kubernetes_shape(c, docs, "kubernetes", ha=False)
    check_references(c, docs, "kubernetes")
    kubectl_build(c, "deploy/kubernetes", "kubernetes", docs)
    ha_docs = kustomize(c, "deploy/kubernetes-ha", "kubernetes-ha")
    check_kubernetes_shape(c, ha_docs, "kubernetes-ha", ha=True)
    check_references(c, ha_docs, "kubernetes-ha")
    check_kubernetes_ha(c, ha_docs)
    kubectl_build(c, "deploy/kubernetes-ha", "kubernetes-ha", ha_docs)


def check_kubernetes_ha(c, docs):
    label = "kubernetes-ha"
    find = lambda kind: [d for d in docs if d["kind"] == kind]  # noqa: E731
    services = {s["metadata"]["name"]: s for s in find("Service")}
    sts = next((s for s in find("StatefulSet") if any("etcd" in x["image"].split("/")[-1]
                                                    for x in s["spec"]["template"]["spec"]["containers"])), None)
    if not c.expect(sts is not None and sts["spec"].get("replicas") == 3, f"{label}: an etcd StatefulSet of 3"):
        return
    pod = sts["spec"]["template"]["spec"]
    etcd = next(x for x in pod["containers"] if "etcd" in x["image"].split("/")[-1])
    c.check_flags("etcd", etcd.get("args", []), f"{label} etcd StatefulSet args")
    headless = services.get(sts["spec"].get("serviceName"), {}).get("spec", {})
    c.expect(headless.get("clusterIP") == "None" and headless.get("publishNotReadyAddresses") is True and
             headless.get("selector", {}).items() <= sts["spec"]["template"]["metadata"]["labels"].items(),
             f"{label}: the StatefulSet's serviceName is a headless Service publishing members before they are ready")
    c.expect(sts["spec"].get("podManagementPolicy") == "Parallel", f"{label}: etcd members start together (Parallel)")
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in etcd.get("env", [])}
    c.expect(env.get("POD_NAME") == "metadata.name", f"{label}: each member is named after its pod (downward API)")
    name = sts["metadata"]["name"]
    members = {f"{name}-{i}": [str(a).replace("$(POD_NAME)", f"{name}-{i}") for a in etcd.get("args", [])] for i in range(3)}
    job_tls = next((st for job in find("Job") for x in job["spec"]["template"]["spec"].get("initContainers", [])
                    for st in [init_step(x.get("command"), x.get("args"))] if st and st[0] == "k8s-tls"), None)
    opts = job_tls[1] if job_tls else {}
    endpoints = etcd_members_check(c, label, members, set(opts.get("etcd-dns", [])))
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in etcd.get("volumeMounts", [])}
    tls_secret = {vols.get(mounts.get(os.path.dirname(c.flag_value(etcd["args"], f) or "")), {}).get("secret", {}).get("secretName")
                  for f in ("cert-file", "key-file", "trusted-ca-file", "peer-cert-file", "peer-key-file", "peer-trusted-ca-file")}
    prefix = opts.get("etcd-secrets", [None])[0]
    c.expect(prefix is not None and tls_secret == {f"{prefix}-member"},
             f"{label}: etcd's TLS files, its trusted CA included, come from the members' Secret the init Job makes "
             f"(-etcd-secrets {prefix}; mounted: {tls_secret})")
    c.expect("mooring-controlplane-tls" not in {v.get("secret", {}).get("secretName") for v in vols.values()},
             f"{label}: etcd members do not mount the Mooring CA's Secret")
    mounted = {v["secret"]["secretName"]: d["metadata"]["name"] for d in docs if "template" in d.get("spec", {})
               for v in d["spec"]["template"]["spec"].get("volumes", []) if "secret" in v}
    c.expect(f"{prefix}-ca" not in mounted, f"{label}: no pod mounts etcd's CA (Secret {prefix}-ca)"
             + (f": {mounted.get(f'{prefix}-ca')} does" if f"{prefix}-ca" in mounted else ""))
    c.expect(any(t["metadata"]["name"] == "data" for t in sts["spec"].get("volumeClaimTemplates", [])) and
             "/var/lib/etcd" in mounts, f"{label}: each etcd member keeps its data on its own volume claim")

    cp = next(d for d in find("Deployment") if any(x["image"].split("/")[-1].startswith("controlplane")
                                                    for x in d["spec"]["template"]["spec"]["containers"]))
    cpod = cp["spec"]["template"]["spec"]
    ctr = next(x for x in cpod["containers"] if x["image"].split("/")[-1].startswith("controlplane"))
    cenv = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in ctr.get("env", [])}
    c.expect(cenv.get("POD_IP") == "status.podIP", f"{label}: the control plane knows its pod IP (downward API)")
    cvols = {v["name"]: v for v in cpod.get("volumes", [])}
    cmounts = {m["mountPath"]: m["name"] for m in ctr.get("volumeMounts", [])}

    def secret_of(path):
        return cvols.get(cmounts.get(os.path.dirname(path or "")), {}).get("secret", {}).get("secretName")
    keyring_secret = controlplane_ha_check(
        c, label, "Deployment", ctr.get("args", []), endpoints, "$(POD_IP)",
        lambda path: secret_of(path) if secret_of(path) in opts.get("keyring-secret", []) and
        os.path.basename(path) == "keyring" else None)
    c.expect(keyring_secret is not None, f"{label}: every replica reads the one keyring of Secret {keyring_secret}")
    files = [c.flag_value(ctr["args"], f) or "" for f in ("etcd-cacert", "etcd-cert", "etcd-key")]
    c.expect(all(secret_of(f) == f"{prefix}-client" for f in files) and
             [os.path.basename(f) for f in files] == ["ca.pem", "client.pem", "client-key.pem"],
             f"{label}: the control plane's etcd files {files} are etcd's CA and its client certificate "
             f"(Secret {prefix}-client)")
    c.expect(f"{prefix}-member" not in {v.get("secret", {}).get("secretName") for v in cvols.values()},
             f"{label}: the control plane does not mount etcd's member Secret")


def check_kubernetes_shape(c, docs, label, ha):
    find = lambda kind: [d for d in docs if d["kind"] == kind]  # noqa: E731
    deployments, daemonsets, services, pvcs, cms = (find(k) for k in
                                                    ("Deployment", "DaemonSet", "Service", "PersistentVolumeClaim", "ConfigMap"))

    def image_binary(container):
        name = container["image"].split("/")[-1].split(":")[0]
        return IMAGE_BINARY.get(name)

    # Control plane
    cp = next((d for d in deployments if any(image_binary(x) == "mooring-controlplane"
                                             for x in d["spec"]["template"]["spec"]["containers"])), None)
    if not c.expect(cp is not None, f"{label}: a control plane Deployment"):
        return
    pod = cp["spec"]["template"]["spec"]
    ctr = next(x for x in pod["containers"] if image_binary(x) == "mooring-controlplane")
    c.check_target("mooring-controlplane")
    c.check_flags("mooring-controlplane", ctr.get("args", []), "Deployment control plane args")
    http_port = c.port_of(c.flag_value(ctr["args"], "http-addr"))
    grpc_port = c.port_of(c.flag_value(ctr["args"], "grpc-addr"))
    named = {p["name"]: p["containerPort"] for p in ctr.get("ports", [])}
    c.expect(http_port == DEFAULT_PORTS["http"] == named.get("http") and
             grpc_port == DEFAULT_PORTS["controlplane-grpc"] == named.get("grpc"),
             f"{label}: control plane ports http 4700 / grpc 4701 match its flags")
    for probe, path in (("livenessProbe", "/v1/status/health"), ("readinessProbe", "/v1/status/ready")):
        g = ctr.get(probe, {}).get("httpGet", {})  # HTTPS: check_kubernetes_tls
        c.expect(g.get("path") == path and named.get(g.get("port"), g.get("port")) == http_port,
                 f"{label}: control plane {probe} on {path}")
    c.expect(pod.get("securityContext", {}).get("runAsNonRoot") is True, f"{label}: control plane runs as non-root")
    c.expect(cp["spec"].get("replicas") == (3 if ha else 1) and cp["spec"].get("strategy", {}).get("type") == "Recreate",
             f"{label}: {3 if ha else 1} control plane replica(s), replaced with Recreate "
             + ("(only the leader is ready: a rolling update would wait forever)" if ha else "(single-writer data dir)"))
    data_dir = c.flag_value(ctr["args"], "data-dir")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mount = next((m for m in ctr.get("volumeMounts", []) if m["mountPath"] == data_dir), None)
    claim = vols.get(mount["name"], {}).get("persistentVolumeClaim", {}).get("claimName") if mount else None
    if ha:
        c.expect(mount is not None and "emptyDir" in vols.get(mount["name"], {}) and not pvcs,
                 f"{label}: --data-dir {data_dir} is an emptyDir (the state is in etcd) and no claim is left over")
    else:
        c.expect(claim is not None and any(p["metadata"]["name"] == claim for p in pvcs),
                 f"{label}: --data-dir {data_dir} is on the PersistentVolumeClaim {claim}")
    svc = next((s for s in services if s["spec"].get("selector", {}).items() <=
                cp["spec"]["template"]["metadata"]["labels"].items()), None)
    if c.expect(svc is not None, f"{label}: a Service selects the control plane pods"):
        sp = {p["name"]: p for p in svc["spec"]["ports"]}
        c.expect(sp.get("http", {}).get("port") == 4700 and sp.get("grpc", {}).get("port") == 4701 and
                 all(p.get("targetPort") in named for p in sp.values()),
                 f"{label}: Service exposes http 4700 and grpc 4701 on named container ports")

    # Node agent
    ds = next(iter(daemonsets), None)
    if not c.expect(ds is not None, f"{label}: a node agent DaemonSet"):
        return
    pod = ds["spec"]["template"]["spec"]
    agent = next((x for x in pod["containers"] if image_binary(x) == "mooring-nodeagent"), None)
    plugin = next((x for x in pod["containers"] if image_binary(x) == "mooring-hostpath"), None)
    if not c.expect(agent is not None and plugin is not None, f"{label}: DaemonSet has the agent and a hostpath sidecar"):
        return
    c.check_target("mooring-nodeagent")
    c.check_target("mooring-hostpath")
    c.check_flags("mooring-nodeagent", agent.get("args", []), "DaemonSet agent args")
    c.check_flags("mooring-hostpath", plugin.get("args", []), "DaemonSet hostpath args")
    for x in (agent, plugin):
        c.expect(x.get("securityContext", {}).get("privileged") is True, f"{label}: {x['name']} is privileged")
    c.expect(c.port_of(c.flag_value(agent["args"], "grpc-addr")) == DEFAULT_PORTS["agent-grpc"],
             f"{label}: agent gRPC on the default port 4702")
    # Under mutual TLS the agent's grpc.health.v1 needs a client certificate, which the kubelet's
    # grpc probes cannot present: the probes check the port (docs/secure-by-default.md, "Mutual TLS").
    for probe in ("livenessProbe", "readinessProbe"):
        g = agent.get(probe, {}).get("tcpSocket", {})
        c.expect(g.get("port") == DEFAULT_PORTS["agent-grpc"], f"{label}: agent {probe} is a tcpSocket probe on 4702")
    cfg_path = c.flag_value(agent["args"], "config")
    amounts = {m["mountPath"]: m for m in agent.get("volumeMounts", [])}
    pmounts = {m["mountPath"]: m for m in plugin.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    cfg_mount = amounts.get(os.path.dirname(cfg_path or ""))
    cm_name = vols.get(cfg_mount["name"], {}).get("configMap", {}).get("name") if cfg_mount else None
    cm = next((m for m in cms if m["metadata"]["name"] == cm_name), None)
    if not c.expect(cm is not None and os.path.basename(cfg_path) in cm.get("data", {}),
                    f"{label}: --config {cfg_path} comes from ConfigMap {cm_name}"):
        return
    cfg = json.loads(cm["data"][os.path.basename(cfg_path)])
    c.check_agent_config(cfg, f"ConfigMap {cm_name}")
    host, port = cfg.get("controlplane_addr", ":").rsplit(":", 1)
    if ha:
        # Every replica: a headless Service that lists the not-ready standbys too (they redirect).
        peers = next((s for s in services if s["metadata"]["name"] == host), {})
        spec = peers.get("spec", {})
        c.expect(spec.get("clusterIP") == "None" and spec.get("publishNotReadyAddresses") is True and
                 spec.get("selector", {}).items() <= cp["spec"]["template"]["metadata"]["labels"].items() and
                 any(p.get("port") == int(port) == 4701 for p in spec.get("ports", [])),
                 f"{label}: agent controlplane_addr {cfg.get('controlplane_addr')} is a headless Service of every "
                 "control plane replica, not-ready standbys included")
    else:
        c.expect(svc is not None and host == svc["metadata"]["name"] and int(port) == 4701,
                 f"{label}: agent controlplane_addr {cfg.get('controlplane_addr')} is the control plane Service")
    sockets = [p["socket"] for p in cfg.get("plugins", []) if "socket" in p]
    socket = sockets[0] if sockets else ""
    c.expect(c.flag_value(plugin["args"], "endpoint") == "unix://" + socket,
             f"{label}: sidecar --endpoint is the agent's plugin socket {socket}")
    sd = os.path.dirname(socket)
    c.expect(sd in amounts and sd in pmounts and amounts[sd]["name"] == pmounts[sd]["name"] and
             "hostPath" in vols.get(amounts[sd]["name"], {}),
             f"{label}: agent and sidecar share the socket dir {sd} (hostPath)")
    data_dir = c.flag_value(agent["args"], "data-dir") or cfg.get("data_dir")
    c.expect(data_dir in amounts and data_dir in pmounts and
             amounts[data_dir].get("mountPropagation") == "Bidirectional" and
             pmounts[data_dir].get("mountPropagation") == "Bidirectional" and
             "hostPath" in vols.get(amounts[data_dir]["name"], {}),
             f"{label}: agent data dir {data_dir} is a hostPath with Bidirectional propagation in both containers")

    check_kubernetes_tls(c, docs, cp, ds, label)


def check_examples(c):
    cfg = json.loads(c.read("examples/agent.json"))
    c.check_agent_config(cfg, "examples/agent.json")
    for p in cfg.get("plugins", []):
        if "command" in p:
            c.expect(os.path.basename(p["command"]) in BINARIES, f"examples/agent.json: plugin command {p['command']} is our binary")
            c.check_flags(os.path.basename(p["command"]), p.get("args", []), "examples/agent.json plugin args")


def run_yamllint(c, cfg):
    yl = shutil.which("yamllint")
    if not yl:
        return c.skip("yamllint is not installed")
    files = [c.path("docker/compose.yaml")] + sorted(
        os.path.join(c.path(d), f) for d in ("deploy/kubernetes", "deploy/kubernetes-ha")
        for f in os.listdir(c.path(d)) if f.endswith(".yaml"))
    res = subprocess.run([yl, "-s", "-c", cfg] + files, capture_output=True, text=True, timeout=60)
    c.expect(res.returncode == 0, "yamllint: compose file and manifests" + (f"\n{res.stdout}" if res.returncode else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("--build", default=os.environ.get("MOORING_BUILD_DIR", ""))
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH",
                    help="use this binary instead of the one in the build dir")
    args = ap.parse_args()
    overrides = dict(b.split("=", 1) for b in args.bin)
    c = Checker(os.path.abspath(args.repo), args.build, overrides)
    run_yamllint(c, os.path.join(os.path.dirname(os.path.abspath(__file__)), "yamllint.yaml"))
    check_routes(c)
    check_no_plaintext(c)
    check_init_script(c)
    check_dockerfile(c)
    check_compose(c)
    check_kubernetes(c)
    check_examples(c)
    print(f"\n{c.passed} passed, {len(c.failed)} failed, {len(c.skipped)} skipped")
    for f in c.failed:
        print(f"  failed: {f}")
    if c.failed:
        return 1
    return 0 if c.passed else 77


if __name__ == "__main__":
    sys.exit(main())
