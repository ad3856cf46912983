#!/usr/bin/python3
"""Where did the README's text go? For porting edits made to the long README (before issue 45
split it into docs/): every paragraph, list item and table row of OLD_README must stand, word for
word, in README.md or docs/*.md of ROOT (link targets and heading levels aside, since moving
changes those). What does not is printed with the closest text found and the words that differ.

  moved_text.py OLD_README [ROOT]    e.g. moved_text.py <(git show BRANCH:README.md) .
Exit status 1 when anything is missing; a listed difference may be an intended edit: read it.
"""
import difflib
import glob
import os
import re
import sys


def norm(s):
    s = re.sub(r"\]\([^)]*\)", "]()", s)      # link targets change when text moves
    s = re.sub(r"^#+ ", "", s, flags=re.M)     # so do heading levels
    return re.sub(r"\s+", " ", s).strip()


def chunks(text):
    """Paragraphs, with each list item and table row on its own."""
    out, cur = [], []
    for line in text.split("\n"):
        if not line.strip() or re.match(r"^\s*(- |\d+\. |\| )", line):
            if cur:
                out.append("\n".join(cur))
            cur = [line] if line.strip() else []
        else:
            cur.append(line)
    if cur:
        out.append("\n".join(cur))
    return [c for c in out if norm(c)]


def closest(text, candidates):
    words = text.split()
    best = max(candidates, key=lambda c: difflib.SequenceMatcher(None, text, c).quick_ratio())
    ops = difflib.SequenceMatcher(None, words, best.split()).get_opcodes()
    return "; ".join(f"[{' '.join(words[a:b])}] -> [{' '.join(best.split()[c:d])}]"
                     for tag, a, b, c, d in ops if tag != "equal")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..")
    old = open(sys.argv[1], encoding="utf-8").read()
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    new = "\n".join(open(p, encoding="utf-8").read() for p in pages)
    corpus, new_chunks = norm(new), [norm(c) for c in chunks(new)]
    old_chunks = chunks(old)
    missing = [c for c in old_chunks if norm(c) not in corpus]
    for c in missing:
        print(f"not found word for word: {norm(c)[:100]}...\n  closest differs: {closest(norm(c), new_chunks)[:500]}")
    print(f"{len(old_chunks) - len(missing)} of {len(old_chunks)} chunks found word for word")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
