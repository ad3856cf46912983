#!/usr/bin/python3
"""The dashboard uses nothing the API's contract lacks: every REST call in its JavaScript
(services/controlplane/ui/web/*.js: call("METHOD", path), get(path), watch(path), fetch(path)) names
a documented path and method, and the query parameters it writes are documented for that
operation (watch() adds the blocking query's index and wait).

    dashboard_paths.py             check the dashboard against docs/api/openapi.yaml
    dashboard_paths.py --self-test planted mismatches, each must be caught
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import contract  # noqa: E402

WEB = os.path.join(contract.ROOT, "services", "controlplane", "ui", "web")
# A string or template literal that starts with /v1/, and the call it is the path of.
LITERAL = re.compile(r"""(["'`])(/v1/(?:(?!\1).)*)\1""")
CALL = re.compile(r"""(?:\bcall\(\s*"([A-Z]+)"\s*,|\b(get|watch|fetch)\()\s*$""")


def uses(source, name="<js>"):
    """(method, path with ${…} as {}, query parameter names, where) of each REST call in `source`;
    problems for a /v1/ literal whose method cannot be told."""
    found, problems = [], []
    for lineno, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("//"):
            continue
        for m in LITERAL.finditer(line):
            where = f"{name}:{lineno}"
            call = CALL.search(line[: m.start()])
            if not call:
                problems.append(f"{where}: {m.group(2)}: not the path of a call(), get(), watch() or fetch()")
                continue
            method = call.group(1) or "GET"
            text = re.sub(r"\$\{[^}]*\}", "{}", m.group(2))
            path, _, query = text.partition("?")
            params = {p.split("=", 1)[0] for p in query.split("&") if p and not p.startswith("{")}
            if call.group(2) == "watch":
                params |= {"index", "wait"}
            found.append((method, path, params, where))
    return found, problems


def check(c, source, name="<js>"):
    found, problems = uses(source, name)
    for method, path, params, where in found:
        template = c.template(path.replace("{}", "x"))
        op = c.doc["paths"].get(template, {}).get(method.lower()) if template else None
        if op is None:
            problems.append(f"{where}: {method} {path}: not in docs/api/openapi.yaml")
            continue
        item = c.doc["paths"][template]
        documented = {c.resolve(p)["name"] for p in item.get("parameters", []) + op.get("parameters", [])
                      if c.resolve(p).get("in") == "query"}
        for p in sorted(params - documented):
            problems.append(f"{where}: {method} {template}: query parameter {p!r} is not documented")
    return found, problems


def main():
    c = contract.Contract(contract.load())
    calls, problems = 0, []
    for path in sorted(glob.glob(os.path.join(WEB, "*.js"))):
        with open(path, encoding="utf-8") as f:
            found, p = check(c, f.read(), os.path.relpath(path, contract.ROOT))
        calls += len(found)
        problems += p
    for p in problems:
        print("FAIL:", p)
    if calls == 0:
        print("FAIL: found no REST call in the dashboard; the pattern no longer matches its code")
        return 1
    print(f"dashboard: {calls} REST calls, {len(problems)} not in the contract")
    return 1 if problems else 0


def self_test():
    c = contract.Contract(contract.load())
    cases = [
        ('watch(`/v1/volume/csi/${enc(id)}?${nsQuery(ns)}`, signal, f);', None),
        ('run: () => call("DELETE", `/v1/volume/csi/${enc(v.ID)}/detach?node=${enc(n)}&${nsQuery(ns)}`)', None),
        ('const r = await get("/v1/acl/token/self");', None),
        ('watch(`/v1/volume/${enc(id)}/claims`, signal, f);', "not in docs/api/openapi.yaml"),
        ('call("PATCH", `/v1/volume/csi/${enc(id)}`)', "PATCH /v1/volume/csi/{}: not in"),
        ('call("POST", "/v1/plugins")', "POST /v1/plugins: not in"),
        ('get(`/v1/events?topic=Plugin&since=${t}`)', "query parameter 'since' is not documented"),
        ('watch("/v1/acl/token/self", signal, f);', "query parameter 'index' is not documented"),
        ('const url = "/v1/nodes";', "not the path of a call()"),
    ]
    return contract.run_planted("dashboard", cases, lambda source: check(c, source)[1])


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
