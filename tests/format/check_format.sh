#!/bin/sh
# ctest format_check: every product file is as clang-format (.clang-format) writes it. Fails
# naming the files that are not; `make format` rewrites them. clang-format 14 (Debian 12's) is
# the reference: another major version may break lines differently.
set -eu
root=${1:-$(dirname "$0")/../..}
cd "$root"
command -v clang-format >/dev/null || { echo "format_check: clang-format is not installed (scripts/install-deps.sh test)"; exit 1; }
bad=0
for f in $(./scripts/source-files.sh); do
  if ! clang-format --dry-run -Werror "$f" 2>/dev/null; then
    echo "not formatted: $f"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "format_check: $bad file(s) differ from clang-format's output; run \`make format\`"
  exit 1
fi
echo "format_check: $(./scripts/source-files.sh | wc -l) files formatted"
