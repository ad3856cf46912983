#!/usr/bin/env python3
"""Product files under 500 lines and functions under 80 (the project's standard, issue 42).
Reads the files scripts/source-files.sh lists (the ones format_check covers) and fails, naming
file:line, on a file of 500 lines or more and on a function of more than 80 lines that is not a
listed exception; and on a listed exception that is no longer too long, so the list stays true.

Functions are found by the layout clang-format gives them (format_check keeps it): a definition
at namespace scope starts on a line at column 0 and ends at the next line that is exactly "}";
one defined in a class body at column 0 starts at column 2 and ends at "  }". A function's
lambdas count toward it. `--self-test` plants a long file and a long function in a copy and
requires both named.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from check_main import run

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAX_FILE_LINES = 499
MAX_FUNCTION_LINES = 80
# file:first line's name -> why it is still long. Empty: none today.
EXCEPTIONS = {}

NOT_A_HEADER = ("#", "//", "/*", "*", "}", "namespace", "using ", "extern ", "template <", "template<", "{")
CLASS = re.compile(r"^(class|struct)\s+\w+[^;]*\{$")


def product_files(root):
    out = subprocess.run(["sh", os.path.join(root, "scripts", "source-files.sh")], capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def definition(lines, i, indent):
    """If a function's definition starts at lines[i] (at `indent`), the index of its last line."""
    pad = " " * indent
    # The header runs to the line that opens the body ("{" at its end) or ends a declaration.
    j = i
    while j < len(lines):
        text = lines[j].rstrip()
        if text.endswith(";") and "{" not in text:
            return None
        if text.endswith("{"):
            break
        if text.startswith(pad + "}") or (j > i and len(text) - len(text.lstrip()) < indent and text):
            return None
        j += 1
    else:
        return None
    header = " ".join(line.strip() for line in lines[i:j + 1])
    if "(" not in header or CLASS.match(header) or header.startswith(("enum", "union")):
        return None
    if re.match(r"[^(]*=", header):  # a variable (or a lambda) with an initializer
        return None
    for k in range(j + 1, len(lines)):
        text = lines[k].rstrip()
        if text.startswith(pad + "}") and len(text) - len(text.lstrip()) == indent:
            return k if text == pad + "}" else None
    return None


def long_functions(lines):
    """(first line, length, name) of each function longer than MAX_FUNCTION_LINES."""
    found = []
    i = 0
    in_class = False
    while i < len(lines):
        text = lines[i].rstrip()
        indent = 2 if in_class else 0
        if not in_class and CLASS.match(text):
            in_class = True
            i += 1
            continue
        if in_class and text.startswith("};"):
            in_class = False
            i += 1
            continue
        starts = text and len(text) - len(text.lstrip()) == indent and not text.strip().startswith(NOT_A_HEADER)
        end = definition(lines, i, indent) if starts else None
        if end is None:
            i += 1
            continue
        length = end - i + 1
        if length > MAX_FUNCTION_LINES:
            name = re.search(r"([~\w:]+)\s*\(", " ".join(line.strip() for line in lines[i:i + 3]))
            found.append((i + 1, length, name.group(1) if name else "?"))
        i = end + 1
    return found


def check(root):
    problems = []
    seen = set()
    for path in product_files(root):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            lines = f.read().splitlines()
        if len(lines) > MAX_FILE_LINES:
            problems.append(f"{path}: {len(lines)} lines (a product file stays under {MAX_FILE_LINES + 1})")
        for line, length, name in long_functions(lines):
            key = f"{path}:{name}"
            if key in EXCEPTIONS:
                seen.add(key)
                continue
            problems.append(f"{path}:{line}: {name} is {length} lines (a function stays within {MAX_FUNCTION_LINES})")
    for key in sorted(set(EXCEPTIONS) - seen):
        problems.append(f"{key}: listed as an exception but no longer too long: take it off the list")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        for top in ("scripts", "shared"):
            shutil.copytree(os.path.join(ROOT, top), os.path.join(tmp, top))
        subprocess.run(["git", "init", "-q", tmp], check=True)
        body = "\n".join(f"  int x{n} = {n};" for n in range(MAX_FUNCTION_LINES))
        planted = {
            "shared/log/planted_long_file.cpp": "\n".join(f"int v{n} = {n};" for n in range(MAX_FILE_LINES + 1)),
            "shared/log/planted_long_function.cpp": f"namespace a {{\n\nint planted(int y) {{\n{body}\n  return y;\n}}\n\n}}\n",
            "shared/log/planted_member.hpp": f"struct S {{\n  int planted_member() const {{\n{body}\n    return 0;\n  }}\n}};\n",
        }
        for rel, text in planted.items():
            with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                f.write(text + "\n")
        subprocess.run(["git", "-C", tmp, "add", "-A"], check=True)
        problems = check(tmp)
    wanted = ["planted_long_file.cpp: 500 lines", "planted_long_function.cpp:3: planted is",
              "planted_member.hpp:2: planted_member is"]
    missing = [w for w in wanted if not any(w in p for p in problems)]
    if missing:
        print("self-test: the check did not name " + "; ".join(missing))
        print("\n".join(problems))
        return 1
    print(f"self-test: the check named the {len(wanted)} planted lengths")
    return 0


if __name__ == "__main__":
    sys.exit(run(check, self_test, ROOT, "lengths"))
