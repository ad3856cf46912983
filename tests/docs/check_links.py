#!/usr/bin/python3
"""The docs tree holds together: every relative link and #anchor in the project's Markdown
(README.md, docs/**/*.md, docker/, bench/, deploy/*/ and plugins/*/ READMEs) names a file that
exists and, for an anchor into Markdown, a heading there, by GitHub's anchor rules; and README.md
stays a front door of at most 250 lines. Each problem is printed as FILE:LINE: ... and the exit
status is 1 when there is one.

  check_links.py [--root DIR]   check the tree (default: this repository)
  check_links.py --self-test    plant broken links in a scratch tree and show each is caught
"""
import argparse
import glob
import os
import re
import sys
import tempfile
import urllib.parse

README_MAX_LINES = 250
SCOPE = ["README.md", "docs/**/*.md", "docker/README.md", "bench/README.md",
         "deploy/*/README.md", "plugins/*/README.md"]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REF_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+(<[^>]*>|\S+)")
HTML_TARGET = re.compile(r"<(?:a|img)\s[^>]*?(?:href|src)=\"([^\"]+)\"", re.I)
HTML_ANCHOR = re.compile(r"<a\s[^>]*?(?:name|id)=\"([^\"]+)\"", re.I)
EXTERNAL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*:|//)")


def markdown_lines(text):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: its text as rendered, lowercased, punctuation dropped,
    each space a '-' (github-slugger)."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)      # a link shows its text
    text = re.sub(r"<[^>]+>", "", text)                           # HTML tags
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)          # emphasis markers
    text = text.strip().lower()
    return "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")


def anchors(text):
    """Every anchor a Markdown file offers: its headings' slugs (a repeated one gets -1, -2, ...)
    and explicit <a name=...>/<a id=...>."""
    found, seen = set(), {}
    for _, line in markdown_lines(text):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        found.update(HTML_ANCHOR.findall(line))
    return found


def link_targets(text):
    """(line number, target) of every link, outside code blocks and code spans."""
    for number, line in markdown_lines(text):
        line = CODE_SPAN.sub("", line)
        for m in INLINE_LINK.finditer(line):
            yield number, m.group(1).strip("<>")
        m = REF_DEFINITION.match(line)
        if m:
            yield number, m.group(1).strip("<>")
        for target in HTML_TARGET.findall(line):
            yield number, target


class Tree:
    """The files of a checkout, with their anchors read once."""

    def __init__(self, root):
        self.root = os.path.realpath(root)
        self._anchors = {}
        self.links = 0

    def files(self):
        paths = set()
        for pattern in SCOPE:
            paths.update(glob.glob(os.path.join(self.root, pattern), recursive=True))
        return sorted(p for p in paths if os.path.isfile(p))

    def anchors_of(self, path):
        if path not in self._anchors:
            with open(path, encoding="utf-8") as f:
                self._anchors[path] = anchors(f.read())
        return self._anchors[path]

    def problem(self, source, target):
        """Why a link from `source` to `target` is broken, or None."""
        if EXTERNAL.match(target):
            return None
        path, _, anchor = target.partition("#")
        path, anchor = urllib.parse.unquote(path), urllib.parse.unquote(anchor)
        if path.startswith("/"):
            resolved = os.path.join(self.root, path.lstrip("/"))
        else:
            resolved = os.path.join(os.path.dirname(source), path) if path else source
        resolved = os.path.realpath(resolved)
        if os.path.commonpath([resolved, self.root]) != self.root:
            return "points outside the repository"
        if not os.path.exists(resolved):
            return f"no such file: {os.path.relpath(resolved, self.root)}"
        if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
            if anchor not in self.anchors_of(resolved):
                return f"no heading with anchor #{anchor} in {os.path.relpath(resolved, self.root)}"
        return None

    def check(self):
        problems = []
        for path in self.files():
            rel = os.path.relpath(path, self.root)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for number, target in link_targets(text):
                self.links += 1
                why = self.problem(path, target)
                if why:
                    problems.append(f"{rel}:{number}: broken link ({target}): {why}")
            if rel == "README.md":
                count = len(text.splitlines())
                if count > README_MAX_LINES:
                    problems.append(f"README.md:{count}: README.md has {count} lines, more than "
                                    f"{README_MAX_LINES}: move detail into docs/")
        return problems


# --- self-test: a scratch tree with known good and known broken links -------------------------

GOOD_README = """# Project
See [the guide](docs/guide.md), [a section](docs/guide.md#a-heading-with-code-and-punctuation),
[the second one](docs/guide.md#same-1), [here](#project), [docs](docs/), ![shot](docs/shot.png),
[web](https://example.com/x.md), <https://example.com>, [mail](mailto:a@example.com),
[explicit](docs/guide.md#custom), [spaced](<docs/guide.md>), [encoded](docs/guide.md#%C3%A9t%C3%A9-lit-cest-ok)
and `[in code](missing.md)`.

```sh
[in a fence](missing.md)
```
"""
GOOD_GUIDE = """# Guide
## A heading: with `code`, and *punctuation*!
## Same
## Same
## Été, lit: c'est ok
<a name="custom"></a>
[back](../README.md#project)
[ref]: ../docker/README.md
"""
# Each planted link: (file, line, text); the test expects exactly these lines to be named.
PLANTED = [
    ("docs/guide.md", "[gone](missing.md)", "no such file: docs/missing.md"),
    ("docs/guide.md", "[no heading](#nowhere)", "no heading with anchor #nowhere in docs/guide.md"),
    ("docs/guide.md", "[other file](../README.md#not-there)", "no heading with anchor #not-there in README.md"),
    ("docker/README.md", "[escape](../../outside.md)", "points outside the repository"),
    ("docker/README.md", "[case](../docs/guide.md#Same)", "no heading with anchor #Same"),
    ("docker/README.md", "[img](<../docs/nope.png>)", "no such file: docs/nope.png"),
    ("docker/README.md", "[ref]: ../docs/absent.md", "no such file: docs/absent.md"),
]


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def good_tree(root):
    write(root, "README.md", GOOD_README)
    write(root, "docs/guide.md", GOOD_GUIDE)
    write(root, "docs/shot.png", "")
    write(root, "docker/README.md", "# Docker\n[up](../README.md)\n")


def self_test():
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        good = os.path.join(scratch, "good")
        good_tree(good)
        problems = Tree(good).check()
        if problems:
            failures.append("the good tree is refused:\n  " + "\n  ".join(problems))

        bad = os.path.join(scratch, "bad")
        good_tree(bad)
        expected = []
        for rel, link, why in PLANTED:
            path = os.path.join(bad, rel)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            text += link + "\n"
            write(bad, rel, text)
            expected.append((f"{rel}:{len(text.splitlines())}:", why))
        write(bad, "README.md", GOOD_README + "line\n" * (README_MAX_LINES + 1 - len(GOOD_README.splitlines())))
        expected.append((f"README.md:{README_MAX_LINES + 1}:", f"more than {README_MAX_LINES}"))
        problems = Tree(bad).check()
        for where, why in expected:
            if not any(p.startswith(where) and why in p for p in problems):
                failures.append(f"not caught: {where} {why}")
        for p in problems:
            if not any(p.startswith(where) and why in p for where, why in expected):
                failures.append(f"caught but not planted: {p}")
        print(f"self-test: {len(expected)} planted problems; the checker printed:")
        for p in problems:
            print("  " + p)
    if failures:
        print("self-test FAILED:\n" + "\n".join(failures))
        return 1
    print("self-test passed: the good tree passes and every planted problem is named")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    tree = Tree(args.root)
    files = tree.files()
    problems = tree.check()
    for p in problems:
        print(p)
    print(f"{len(files)} Markdown files, {tree.links} links checked: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
