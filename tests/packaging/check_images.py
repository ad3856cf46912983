#!/usr/bin/env python3
"""The cheap, static half of `make compose-test` (which builds and runs the images for real, too
slowly for `make test`): what broke the compose stack once and can regress without a Docker engine.

  - /.dockerignore keeps build trees, .git and every local stack's data (.mooring*) out of the
    build context, at the context root where both builders read it, with no second list beside
    the Dockerfile that BuildKit would prefer
  - every image runs docker/check-libs.sh (ldd, fail on "not found") on each binary it copies in,
    and docker/README.md names every library package the runtime stage installs
  - no VOLUME instruction (anonymous volumes that `down -v` leaves behind)
  - the build stage installs the `build` set only, which holds no test or bench extras, and copies
    every folder the non-test CMake build reads
  - the compose agents drain on SIGTERM within their stop_grace_period and depend directly on
    their control planes, so `down` stops those after the drain (it leaves no mount),
    and docker/README.md's walkthrough blocks, which compose-test runs, set up the shared mount
  - the Makefile: `run` installs build+run, `test` adds the test extras, `bench` the bench ones,
    and `compose-test` is its own target, not part of `test`
Exit 0 when nothing failed, 1 otherwise.
"""
import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed (scripts/install-deps.sh test installs it)")
    sys.exit(77)

TEST_EXTRAS = {"libgtest-dev", "libgmock-dev", "chromium", "chromium-driver", "python3-selenium", "prometheus",
               "yamllint", "docker-compose", "wrk", "nginx-light"}
MUST_IGNORE = [".git", "build", ".mooring", ".mooring-ha", ".mooring-compose", "services/x/build"]
MUST_KEEP = ["CMakeLists.txt", "shared/log/log.cpp", "docker/mooring-init.sh", "docker/check-libs.sh"]


class Checks:
    def __init__(self, repo):
        self.repo, self.passed, self.failed = repo, 0, []

    def expect(self, cond, what):
        print(("PASS: " if cond else "FAIL: ") + what)
        if cond:
            self.passed += 1
        else:
            self.failed.append(what)
        return cond

    def read(self, rel):
        with open(os.path.join(self.repo, rel)) as f:
            return f.read()


def ignored(patterns, path):
    """Docker's rule, close enough for these names: a pattern matches the path or a parent of it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    out = False
    for p in patterns:
        neg = p.startswith("!")
        pat = p[1:] if neg else p
        if any(fnmatch.fnmatch(x, pat) or (pat.startswith("**/") and fnmatch.fnmatch(x.split("/")[-1], pat[3:]))
               for x in prefixes):
            out = not neg
    return out


def check_ignore_file(c):
    path = os.path.join(c.repo, ".dockerignore")
    if not c.expect(os.path.exists(path), "/.dockerignore exists at the build context's root (both builders read it)"):
        return
    patterns = [ln.strip() for ln in c.read(".dockerignore").splitlines() if ln.strip() and not ln.startswith("#")]
    for p in MUST_IGNORE:
        c.expect(ignored(patterns, p), f".dockerignore keeps {p} out of the build context")
    for p in MUST_KEEP:
        c.expect(not ignored(patterns, p), f".dockerignore keeps {p} in the build context")
    c.expect(not os.path.exists(os.path.join(c.repo, "docker", "Dockerfile.dockerignore")),
             "no docker/Dockerfile.dockerignore (BuildKit would read it instead of /.dockerignore: one list)")


def stages(text):
    out, cur = {}, None
    for line in re.sub(r"\\\n", " ", text).splitlines():
        m = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line.strip(), re.I)
        if m:
            cur = out.setdefault(m.group(2), {"from": m.group(1), "lines": []})
        elif cur is not None:
            cur["lines"].append(line.strip())
    return out


def check_dockerfile(c):
    text = c.read("docker/Dockerfile")
    st = stages(text)
    c.expect(not re.search(r"^\s*VOLUME\b", text, re.M), "Dockerfile: no VOLUME (no anonymous volumes left by down -v)")
    for name in ("runtime", "controlplane", "nodeagent", "hostpath"):
        lines = st.get(name, {}).get("lines", [])
        copied = [m.group(1) for ln in lines for m in [re.match(r"COPY --from=build \S+ (/usr/local/bin/\S+)", ln)] if m]
        checked = " ".join(ln for ln in lines if "check-libs.sh" in ln and ln.startswith("RUN"))
        c.expect(bool(copied) and all(b in checked for b in copied),
                 f"Dockerfile '{name}': check-libs.sh (ldd) runs on {', '.join(copied) or 'its binaries'}")
    runtime = " ".join(st.get("runtime", {}).get("lines", []))
    c.expect("COPY docker/check-libs.sh" in runtime, "Dockerfile 'runtime': carries docker/check-libs.sh")
    m = re.search(r"apt-get install -y --no-install-recommends (.*?)&&", runtime)
    pkgs = m.group(1).split() if m else []
    readme = c.read("docker/README.md")
    libs = [p for p in pkgs if p.startswith("lib")]
    c.expect(bool(libs) and all(f"`{p}`" in readme or p in ("libstdc++6", "libatomic1") for p in libs),
             f"docker/README.md names the runtime library packages {libs}")
    check = c.read("docker/check-libs.sh")
    c.expect("ldd" in check and "not found" in check and "exit" in check, "docker/check-libs.sh fails on a library ldd does not find")
    build = " ".join(st.get("build", {}).get("lines", []))
    c.expect(re.search(r"install-deps\.sh build(\s|&|$)", build) is not None and
             not re.search(r"install-deps\.sh build \w", build),
             "Dockerfile 'build': installs the build set only")
    copies = set(re.findall(r"COPY (\S+) \S+", build))
    for path in build_inputs(c):
        c.expect(any(path == cp or path.startswith(cp + "/") for cp in copies),
                 f"Dockerfile 'build': copies {path}, which the build reads")


def build_inputs(c):
    """Files and folders the Release build (MOORING_TESTS=OFF) reads: the root CMakeLists, its
    add_subdirectory()s outside the test and bench blocks, and whatever path a CMakeLists outside
    tests/ and bench/ names under ${PROJECT_SOURCE_DIR} (docs/api/openapi.yaml: a COPY of docs/api
    covers it, so the other docs stay out of the build's context)."""
    top = c.read("CMakeLists.txt")
    top = re.sub(r"if\(MOORING_(TESTS|BENCH)\)[\s\S]*?endif\(\)", "", top)
    found = {"CMakeLists.txt", "cmake"} | {d.split("/")[0] for d in re.findall(r"add_subdirectory\((\S+)\)", top)}
    for root, dirs, files in os.walk(c.repo):
        rel = os.path.relpath(root, c.repo)
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "build" and
                   (rel != "." or d not in ("tests", "bench"))]
        if "CMakeLists.txt" in files and rel != ".":
            text = open(os.path.join(root, "CMakeLists.txt")).read()
            found |= set(re.findall(r"\$\{PROJECT_SOURCE_DIR\}/([\w./-]*[\w.-])", text))
    return sorted(found)


def check_install_sets(c):
    def listed(*sets):
        res = subprocess.run([os.path.join(c.repo, "scripts", "install-deps.sh"), "--list", *sets],
                             capture_output=True, text=True, timeout=30)
        return set(res.stdout.split()) if res.returncode == 0 else None
    build, test, bench = listed("build"), listed("test"), listed("bench")
    if not c.expect(None not in (build, test, bench), "install-deps.sh --list build|test|bench"):
        return
    c.expect(not (build & TEST_EXTRAS), f"install-deps.sh: the build set holds no test or bench extras ({sorted(build & TEST_EXTRAS)})")
    c.expect({"libgtest-dev", "chromium", "prometheus"} <= test, "install-deps.sh: the test set holds the test extras")
    c.expect({"wrk", "nginx-light"} <= bench, "install-deps.sh: the bench set holds the load tools")
    bad = subprocess.run([os.path.join(c.repo, "scripts", "install-deps.sh"), "--list", "nosuchset"],
                         capture_output=True, text=True, timeout=30)
    c.expect(bad.returncode != 0 and "nosuchset" in bad.stderr, "install-deps.sh: an unknown set is refused, named")
    mk = c.read("Makefile")

    def recipe(target):
        m = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n)*)", mk, re.M)
        return (m.group(1), m.group(2)) if m else ("", "")
    c.expect("install-deps.sh build run\n" in recipe("deps")[1] and "deps" in recipe("build")[0].split(),
             "Makefile: `make run` installs build+run only (deps, through build)")
    c.expect("install-deps.sh build run test\n" in recipe("test-deps")[1] and "test-deps" in recipe("test")[0].split(),
             "Makefile: `make test` adds the test extras")
    c.expect("install-deps.sh build run bench\n" in recipe("bench-deps")[1] and "bench-deps" in recipe("bench")[0].split(),
             "Makefile: `make bench` adds the bench extras")
    c.expect("tests/compose/run.sh" in recipe("compose-test")[1] and "compose" not in recipe("test")[0] + recipe("test")[1],
             "Makefile: compose-test is its own target, not part of `make test`")


def seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m)", str(text).strip())
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)] if m else None


def check_compose(c):
    services = yaml.safe_load(c.read("docker/compose.yaml"))["services"]
    drain = seconds(json.loads(c.read("docker/agent.json")).get("drain_on_shutdown", "0s"))
    agents = [n for n, s in services.items() if s.get("image", "").startswith("mooring/nodeagent") and "command" in s
              and any(str(a).startswith("--config") for a in s["command"])]
    c.expect(bool(agents) and drain is not None and drain > 0, f"docker/agent.json drains on SIGTERM ({drain} s)")
    default_cp = json.loads(c.read("docker/agent.json")).get("controlplane_addr", "")
    for name in agents:
        grace = seconds(services[name].get("stop_grace_period", "10s"))
        c.expect(grace is not None and drain is not None and grace >= drain + 5,
                 f"compose {name}: stop_grace_period {grace} s leaves room for the {drain} s drain")
        # `down` stops a service only after those depending on it directly: the control planes
        # must outlive the drain, which reports every release to them.
        flag = [a.split("=", 1)[1] for a in services[name]["command"] if str(a).startswith("--controlplane-addr=")]
        dialled = {addr.split(":")[0] for addr in (flag[0] if flag else default_cp).split(",")}
        c.expect(dialled <= set(services[name].get("depends_on") or {}),
                 f"compose {name}: depends directly on the control planes it drains to ({sorted(dialled)})")
    for svc_name, svc in services.items():
        c.expect(not svc.get("privileged"), f"compose {svc_name}: not privileged")
        b = svc.get("build")
        if isinstance(b, dict):
            args = b.get("args") or {}
            c.expect("MOORING_BASE_IMAGE" in str(args.get("BASE_IMAGE")) and
                     "MOORING_RUNTIME_BASE_IMAGE" in str(args.get("RUNTIME_BASE_IMAGE")),
                     f"compose {svc_name}: passes the base images as build arguments")
    readme = c.read("docker/README.md")
    for block in ("compose-walkthrough", "compose-ha-walkthrough"):
        m = re.search(rf"<!-- {block}:begin -->\s*```sh\n(.*?)```", readme, re.S)
        body = m.group(1) if m else ""
        setup, up = body.find("docker/host-setup.sh"), body.find(" up -d")
        c.expect(m is not None and 0 <= setup < up, f"docker/README.md {block}: the shared-mount step (host-setup.sh) before up")
    c.expect("down -v" in readme and "down -v" in c.read("docker/compose.yaml"), "down -v is documented")
    hs = c.read("docker/host-setup.sh")
    c.expect("--make-shared" in hs and "make-rshared /" not in hs, "docker/host-setup.sh makes the data dir shared, not /")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    c = Checks(os.path.abspath(ap.parse_args().repo))
    check_ignore_file(c)
    check_dockerfile(c)
    check_install_sets(c)
    check_compose(c)
    print(f"\n{c.passed} passed, {len(c.failed)} failed")
    for f in c.failed:
        print(f"  failed: {f}")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
