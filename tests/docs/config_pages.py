#!/usr/bin/env python3
"""The configuration reference pages (docs/configuration/*.md) are what the binaries print with
--help-markdown, from their own flag tables (issue 45): a page that disagrees with its binary
fails, with the lines that differ and the command that regenerates it.

  config_pages.py --root SRC --bin BUILD            check (ctest configuration_pages)
  config_pages.py --root SRC --bin BUILD --write    regenerate (make config-docs)
  config_pages.py --self-test                       a changed page is caught, so a pass means something
"""
import argparse
import difflib
import os
import subprocess
import sys
import tempfile

# page under docs/configuration/ -> the binary under the build directory that prints it
PAGES = {
    "controlplane.md": "services/controlplane/mooring-controlplane",
    "nodeagent.md": "services/nodeagent/mooring-nodeagent",
    "cli.md": "cli/mooring",
}
REGENERATE = "make config-docs (or: BINARY --help-markdown > docs/configuration/PAGE)"


def printed(binary):
    done = subprocess.run([binary, "--help-markdown"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{binary} --help-markdown exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def disagreements(page_path, expected, binary):
    """'' when the page holds `expected`, else why not (a diff) and how to regenerate it."""
    try:
        with open(page_path) as f:
            actual = f.read()
    except FileNotFoundError:
        actual = None
    if actual == expected:
        return ""
    what = "is missing" if actual is None else "disagrees with the binary"
    diff = "".join(difflib.unified_diff((actual or "").splitlines(True), expected.splitlines(True),
                                        page_path, f"{os.path.basename(binary)} --help-markdown"))
    return f"{page_path} {what}; regenerate it: {REGENERATE}\n{diff}"


def main(root, build, write):
    failures = []
    for page, relative in PAGES.items():
        binary = os.path.join(build, relative)
        path = os.path.join(root, "docs", "configuration", page)
        expected = printed(binary)
        if write:
            with open(path, "w") as f:
                f.write(expected)
            print(f"wrote {path}")
            continue
        problem = disagreements(path, expected, binary)
        if problem:
            failures.append(problem)
        else:
            print(f"{page}: agrees with {relative} --help-markdown")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


def self_test():
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "x.md")
        text = "# x configuration\n| `--a` | `X_A` | `1s` | a |\n"
        with open(page, "w") as f:
            f.write(text)
        ok = disagreements(page, text, "/bin/x") == ""
        changed = disagreements(page, text.replace("1s", "2s"), "/bin/x")
        missing = disagreements(os.path.join(d, "none.md"), text, "/bin/x")
    checks = [(ok, "an agreeing page passes"),
              ("disagrees with the binary" in changed and "+| `--a` | `X_A` | `2s`" in changed
               and "make config-docs" in changed, "a changed default is caught, with the diff and how to regenerate"),
              ("is missing" in missing, "a missing page is caught")]
    for passed, what in checks:
        print(("ok: " if passed else "FAIL: ") + what)
    return 0 if all(p for p, _ in checks) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--root")
    parser.add_argument("--bin")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    sys.exit(self_test() if args.self_test else main(args.root, args.bin, args.write))
