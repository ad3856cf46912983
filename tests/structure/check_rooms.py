#!/usr/bin/env python3
"""The rooms' include rules, checked (issue 42). docs/architecture.md holds them in its "Include
rules" section: a ```rooms block naming every room and the rooms it may include, and a
```exceptions block of the includes that break them today, each with the issue that removes it.
Fails, naming file:line, on:
  - an #include "..." of another room that the including room's rule does not allow (and that is
    not a listed exception);
  - a room with sources that the block does not name, or a named room that has no sources;
  - a cycle between rooms (the listed exceptions left out);
  - a listed exception that no longer occurs (so the list stays true).
`--self-test` plants a wrong include in a copy of the tree and requires the check to name it.

A room is a folder of sources: shared/<x>, services/<service>/<x> (the service's own top-level
files are the room services/<service>), plugins/<x>, cli, proto. Files under a room's
subfolders (shared/domain/json) belong to the room. Tests, benchmarks and generated code are not
rooms and are not checked.
"""
import os
import re
import shutil
import sys
import tempfile

from check_main import run

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join("docs", "architecture.md")
SOURCE_DIRS = ("shared", "services", "plugins", "cli", "proto")
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc")
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    parts = path.split("/")
    if parts[0] == "services" and len(parts) >= 3:
        return "/".join(parts[:3]) if len(parts) > 3 else "/".join(parts[:2])
    if parts[0] in ("shared", "plugins") and len(parts) >= 3:
        return "/".join(parts[:2])
    if parts[0] in ("cli", "proto") and len(parts) >= 2:
        return parts[0]
    return None


def block(text, name):
    m = re.search(r"^```" + name + r"\n(.*?)^```", text, re.S | re.M)
    if not m:
        raise SystemExit(f"{DOC}: no ```{name} block (see its \"Include rules\" section)")
    lines = []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def read_rules(root):
    text = open(os.path.join(root, DOC), encoding="utf-8").read()
    rules = {}
    for line in block(text, "rooms"):
        room, _, allowed = line.partition(":")
        rules[room.strip()] = set() if allowed.strip() == "-" else set(allowed.split())
    exceptions = set()
    for line in block(text, "exceptions"):
        source, _, target = line.partition("->")
        exceptions.add((source.strip(), target.split()[0].strip()))
    return rules, exceptions


def sources(root):
    for top in SOURCE_DIRS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in ("gen", "build")]
            for f in sorted(files):
                if f.endswith(EXTENSIONS):
                    yield os.path.relpath(os.path.join(d, f), root)


def find_cycle(edges):
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def check(root):
    rules, exceptions = read_rules(root)
    problems, seen_rooms, edges, used_exceptions = [], set(), set(), set()
    for path in sources(root):
        room = room_of(path)
        if room is None:
            continue
        seen_rooms.add(room)
        with open(os.path.join(root, path), errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = room_of(m.group(1))
                if target is None or target == room:
                    continue
                if (path, target) in exceptions:
                    used_exceptions.add((path, target))
                    continue
                edges.add((room, target))
                if room in rules and target not in rules[room]:
                    problems.append(f"{path}:{number}: the room {room} may not include {target} "
                                    f"(\"{m.group(1)}\"); its rule in {DOC} allows: "
                                    f"{' '.join(sorted(rules[room])) or 'no other room'}")
    for room in sorted(seen_rooms - set(rules)):
        problems.append(f"{DOC}: the room {room} is not named in the ```rooms block")
    for room in sorted(set(rules) - seen_rooms):
        problems.append(f"{DOC}: the ```rooms block names {room}, which has no sources")
    for source, target in sorted(exceptions - used_exceptions):
        problems.append(f"{DOC}: the exception {source} -> {target} no longer occurs: remove it")
    cycle = find_cycle(edges)
    if cycle:
        problems.append("a cycle between rooms: " + " -> ".join(cycle))
    return problems


def self_test():
    with tempfile.TemporaryDirectory(prefix="check-rooms-") as tmp:
        for top in SOURCE_DIRS + ("docs",):
            src = os.path.join(ROOT, top)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(tmp, top), ignore=shutil.ignore_patterns("gen", "build"))
        before = check(tmp)
        if before:
            print("self-test: the copy fails before anything is planted:\n  " + "\n  ".join(before))
            return 1
        planted = os.path.join(tmp, "shared", "domain", "planted.hpp")
        with open(planted, "w") as f:
            f.write('#pragma once\n#include "services/controlplane/api/api.hpp"\n')
        os.makedirs(os.path.join(tmp, "services", "controlplane", "newroom"))
        with open(os.path.join(tmp, "services", "controlplane", "newroom", "x.cpp"), "w") as f:
            f.write("int x;\n")
        after = check(tmp)
        wanted = ["shared/domain/planted.hpp:2: the room shared/domain may not include services/controlplane/api",
                  "the room services/controlplane/newroom is not named"]
        missing = [w for w in wanted if not any(w in p for p in after)]
        # The planted arrow also closes a cycle (api reaches shared/domain): that one may be named too.
        other = [p for p in after if not any(w in p for w in wanted) and not p.startswith("a cycle between rooms")]
        if missing or other:
            print("self-test: expected exactly the planted problems, got:\n  " + "\n  ".join(after))
            return 1
    print("self-test: a planted wrong include and an unnamed room are both reported")
    return 0


if __name__ == "__main__":
    sys.exit(run(check, self_test, ROOT, "rooms"))
