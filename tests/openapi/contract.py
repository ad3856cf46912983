#!/usr/bin/python3
"""The REST API's contract (docs/api/openapi.yaml) as a test oracle: which documented operation a
request hits, and whether an answer (status, content type, JSON body) is one the document allows.
Uses Debian's python3-yaml and python3-jsonschema (Draft 2020-12, OpenAPI 3.1's dialect).

    contract.py --self-test     planted mismatches, each must be caught
"""
import json
import os
import re
import sys

import jsonschema
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCUMENT = os.path.join(ROOT, "docs", "api", "openapi.yaml")
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def load(path=DOCUMENT):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


class Contract:
    def __init__(self, doc):
        self.doc = doc
        self.resolver = jsonschema.RefResolver.from_schema(doc)
        self.routes = []  # (regex, template, number of parameters)
        for template in doc["paths"]:
            regex = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]*", re.escape(template)) + "$"
            self.routes.append((re.compile(regex), template, template.count("{")))
        # A literal path wins over a template (/v1/acl/token/self before /v1/acl/token/{accessor}).
        self.routes.sort(key=lambda r: r[2])

    def operations(self):
        """Every documented (METHOD, template)."""
        return {(m.upper(), t) for t, item in self.doc["paths"].items() for m in item if m in METHODS}

    def template(self, path):
        for regex, template, _ in self.routes:
            if regex.match(path):
                return template
        return None

    def check(self, method, target, status, content_type, body):
        """What is wrong with this answer to `method target` ([] when the document allows it), and
        the documented (METHOD, template) it answered (None when there is none)."""
        path = target.split("?", 1)[0]
        template = self.template(path)
        op = self.doc["paths"].get(template, {}).get(method.lower()) if template else None
        if op is None:
            return [f"{method} {path}: not in the document"], None
        who = f"{method} {template} → {status}"
        response = op.get("responses", {}).get(str(status))
        if response is None:
            return [f"{who}: status {status} is not documented (documented: {sorted(op['responses'])})"], (method, template)
        response = self.resolve(response)
        content = response.get("content", {})
        media = (content_type or "").split(";")[0].strip()
        if not content:
            return ([] if not body else [f"{who}: a body where the document has none"]), (method, template)
        if media not in content:
            return [f"{who}: content type {media!r} is not documented ({sorted(content)})"], (method, template)
        if media != "application/json":
            return [], (method, template)
        try:
            value = json.loads(body)
        except ValueError as e:
            return [f"{who}: the body is not JSON ({e}): {body[:200]!r}"], (method, template)
        return self.validate(who, content[media]["schema"], value), (method, template)

    def check_request(self, method, target, body):
        """What the document's request body schema says of a body the API accepted (a 2xx): a
        body the API takes must be one the document allows."""
        template = self.template(target.split("?", 1)[0])
        op = self.doc["paths"].get(template, {}).get(method.lower()) if template else None
        if op is None:
            return [f"{method} {target}: not in the document"]
        content = self.resolve(op.get("requestBody", {})).get("content", {})
        if "application/json" not in content:
            return [f"{method} {template}: took a body the document does not describe"]
        return self.validate(f"{method} {template} (request)", content["application/json"]["schema"], body)

    def validate(self, who, schema, value):
        validator = jsonschema.Draft202012Validator(schema, resolver=self.resolver)
        problems = []
        for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))[:5]:
            where = "/".join(str(p) for p in e.absolute_path) or "(the body)"
            problems.append(f"{who}: at {where}: {e.message[:300]}")
        return problems

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            node = self.resolver.resolve(node["$ref"])[1]
        return node


def run_planted(name, cases, problems_of):
    """A self-test: `cases` are (input, expected text or None); problems_of(input) -> problems. Exit
    status 0 when each planted mismatch is reported with its text and each allowed input is not."""
    failures = []
    for given, expected in cases:
        got = "\n".join(problems_of(given))
        if expected is None and got:
            failures.append(f"{given!r:.120}: an allowed input was refused: {got}")
        elif expected is not None and expected not in got:
            failures.append(f"{given!r:.120}: expected a problem with {expected!r}, got {got!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"{name} self-test: {len(cases)} planted cases, {len(failures)} failures")
    return 1 if failures else 0


def self_test():
    """Each kind of mismatch between an answer and the document is caught; an allowed answer is not."""
    c = Contract(load())
    error = b'{"Error": "volume not found: x"}'
    cases = [
        # (method, target, status, content type, body, expected problem or None)
        ("GET", "/v1/volume/csi/x", 404, "application/json", error, None),
        ("GET", "/v1/status/health", 200, "application/json", b'{"Status":"ok"}', None),
        ("GET", "/v1/acl/token/self", 401, "application/json", error, None),
        ("GET", "/", 301, "text/plain; charset=utf-8", b"the dashboard is at /ui/\n", None),
        ("GET", "/v1/status/health", 200, "application/json", b'{"Status":"ok","Extra":1}', "Additional properties"),
        ("GET", "/v1/status/ready", 200, "application/json", b'{"Status":"ready","Index":"7"}', "is not of type 'integer'"),
        ("GET", "/v1/volume/csi/x", 404, "application/json", b'{"Message":"gone"}', "'Error' is a required property"),
        ("GET", "/v1/volume/csi/x", 418, "application/json", error, "status 418 is not documented"),
        ("GET", "/v1/volume/csi/x", 200, "text/html", b"<p>", "content type 'text/html' is not documented"),
        ("GET", "/v1/volumes/resize", 200, "application/json", b"[]", "not in the document"),
        ("PATCH", "/v1/volume/csi/x", 200, "application/json", b"{}", "not in the document"),
        ("GET", "/v1/volumes", 200, "application/json", b'[{"ID":"a","Namespace":"default","PluginID":"p","Secrets":{}}]',
         "Additional properties"),
        ("GET", "/v1/acl/token/self", 200, "application/json",
         b'{"AccessorID":"a","SecretID":"s","Name":"n","Type":"client","Policies":[],"CreateTime":"t",'
         b'"ExpirationTime":null,"CreateIndex":1,"ModifyIndex":1}', "Additional properties"),
    ]
    cases = [(case[:5], case[5]) for case in cases]
    requests = [
        (("PUT", "/v1/acl/policy/p", {"Rules": {"Node": "read"}}), None),
        (("POST", "/v1/allocations", {"Allocation": {"Name": "a", "Colour": "blue"}}), "Additional properties"),
        (("PUT", "/v1/volume/csi/v/create", {"Volumes": [{"ID": "v"}]}), "'PluginID' is a required property"),
        (("POST", "/v1/allocation/a/stop", {"Now": True}), "took a body the document does not describe"),
    ]
    cases += [("/v1/acl/token/self", None), ("/ui/", None)]

    def problems_of(given):
        if isinstance(given, str):  # a path and the template it must match
            want = {"/v1/acl/token/self": "/v1/acl/token/self", "/ui/": "/ui/{file}"}[given]
            return [] if c.template(given) == want else [f"{given} matched {c.template(given)}, not {want}"]
        if len(given) == 3:
            return c.check_request(*given)
        return c.check(*given)[0]
    return run_planted("contract", cases + requests, problems_of)


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    print(__doc__)
    sys.exit(2)
