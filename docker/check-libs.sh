#!/bin/sh
# Fails the image build when a binary needs a shared library the image lacks: ldd each one and
# stop on "not found" (a container would otherwise crash-loop with exit 127 at its first start).
set -eu
[ $# -gt 0 ] || { echo "check-libs: name the binaries to check" >&2; exit 2; }
status=0
for binary in "$@"; do
  out=$(ldd "$binary") || { echo "check-libs: ldd $binary failed" >&2; exit 1; }
  missing=$(printf '%s\n' "$out" | grep 'not found' || true)
  if [ -n "$missing" ]; then
    printf 'check-libs: %s needs libraries this image lacks:\n%s\n' "$binary" "$missing" >&2
    status=1
  fi
done
exit $status
