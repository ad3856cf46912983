#!/usr/bin/python3
"""The prose API reference and the contract list the same endpoints: every (method, path) of
docs/api.md's endpoint table is an operation of docs/api/openapi.yaml, and every operation is in
the table, so neither page drifts from the other (the route table is checked against the YAML by
controlplane_openapi_test).

    prose_table.py              check docs/api.md against docs/api/openapi.yaml
    prose_table.py --self-test  planted mismatches, each must be caught
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import contract  # noqa: E402

PROSE = os.path.join(contract.ROOT, "docs", "api.md")
ROW = re.compile(r"^\|\s*((?:GET|PUT|POST|DELETE|PATCH)(?:,\s*(?:GET|PUT|POST|DELETE|PATCH))*)\s*\|((?:[^|\\]|\\.)*)\|")


def table(text):
    """(METHOD, path) of each endpoint row: `:x` kept, optional parts (`[…]`) and queries cut."""
    out = set()
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        methods = [x.strip() for x in m.group(1).split(",")]
        for path in re.findall(r"`([^`]+)`", m.group(2)):
            path = re.split(r"[\[?]", path, maxsplit=1)[0]
            out |= {(method, path) for method in methods}
    return out


def differences(c, text):
    problems, documented = [], set()
    for method, path in sorted(table(text)):
        template = c.template(re.sub(r":[A-Za-z_]+", "x", path))
        if template is None or method.lower() not in c.doc["paths"][template]:
            problems.append(f"docs/api.md: {method} {path}: not in docs/api/openapi.yaml")
        else:
            documented.add((method, template))
    for method, template in sorted(c.operations() - documented):
        problems.append(f"docs/api/openapi.yaml: {method} {template}: not in docs/api.md's endpoint table")
    return problems


def main():
    with open(PROSE, encoding="utf-8") as f:
        text = f.read()
    c = contract.Contract(contract.load())
    problems = differences(c, text)
    for p in problems:
        print("FAIL:", p)
    print(f"docs/api.md: {len(table(text))} endpoints, {len(c.operations())} operations in the contract, "
          f"{len(problems)} differences")
    return 1 if problems else 0


def self_test():
    with open(PROSE, encoding="utf-8") as f:
        text = f.read()
    c = contract.Contract(contract.load())
    cases = [
        (text, None),
        (text.replace("| PUT, POST | `/v1/volume/csi/:id/create` |", "| PUT | `/v1/volume/csi/:id/create` |"),
         "POST /v1/volume/csi/{id}/create: not in docs/api.md"),
        (text + "\n| GET | `/v1/volume/csi/:id/claims` | claims |\n", "GET /v1/volume/csi/:id/claims: not in docs/api/openapi.yaml"),
        (text + "\n| PATCH | `/v1/plugins` | no |\n", "PATCH /v1/plugins: not in docs/api/openapi.yaml"),
    ]
    return contract.run_planted("prose", cases, lambda source: differences(c, source))


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
