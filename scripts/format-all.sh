#!/bin/sh
# The one formatting commit (issue 42): rewrites every product file with clang-format
# (.clang-format) and commits the result, so style is kept by the tool from then on. Run it on
# main after the branches of the stop are merged: done earlier, it would conflict with each of
# them. Afterwards `make format-check` (the ctest format_check) passes; `make format` keeps it so.
set -eu
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format-all: clang-format is not installed (scripts/install-deps.sh test)" >&2; exit 1; }
if ! git diff --quiet || ! git diff --cached --quiet; then
  echo "format-all: the work tree has uncommitted changes; commit or stash them first" >&2
  exit 1
fi
./scripts/source-files.sh | xargs clang-format -i
if git diff --quiet; then
  echo "format-all: every product file is already formatted"
  exit 0
fi
git commit -q -a -m "Format every product file with clang-format (.clang-format; scripts/format-all.sh, issue 42)

No change but white space and line breaks: \`git diff -w\` and the build show it.
From here on \`make format\` keeps the style and the ctest format_check holds it."
echo "format-all: committed $(git diff --stat HEAD~1 | tail -1)"
