#!/usr/bin/env bash
# Installs the Debian 12 packages a Mooring command needs, only those that are missing. Idempotent
# and quiet when everything is present.
#
#   scripts/install-deps.sh SET...      SET: build | run | test | lint | bench
#
#   build  compiling the binaries (the docker image's build stage takes only this set)
#   run    running the local stacks: `make run` (build run), `make run-ha` (etcd)
#   test   the test suite's extras: GoogleTest, the packaging checks, the dashboard's browser
#          test (Chromium), the metrics test (Prometheus), the format check (clang-format);
#          `make test` (build run test)
#   lint   clang-tidy for `make lint` (build run test lint); not part of `make test`
#   bench  the benchmarks' load tools; `make bench` (build run bench)
#   compose what `make compose-test` needs besides a Docker engine and compose, which
#          tests/compose/run.sh installs only when none is there (Docker's own packages conflict
#          with Debian's docker.io)
#
# `--list SET...` prints the packages of those sets and installs nothing (tests/packaging
# reads it; the README's table of each command's packages, time and disk comes from it).
set -euo pipefail

declare -A sets=(
  [build]="build-essential cmake ninja-build ccache pkg-config git
    libboost1.81-dev libboost-url1.81-dev
    libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
    nlohmann-json3-dev libsqlite3-dev libssl-dev prometheus-cpp-dev python3 python3-yaml"
  [run]="util-linux procps curl ca-certificates sqlite3 etcd-server etcd-client"
  [test]="libgtest-dev libgmock-dev iproute2 iptables python3 python3-yaml python3-jsonschema yamllint docker-compose
    prometheus chromium chromium-driver python3-selenium clang-format"
  [lint]="clang-tidy"
  [bench]="wrk nginx-light python3"
  [compose]="python3 mmdebstrap util-linux curl ca-certificates"
)

list_only=0
if [ "${1:-}" = --list ]; then
  list_only=1
  shift
fi
[ $# -gt 0 ] || set -- build run
packages=()
for set_name in "$@"; do
  [ -n "${sets[$set_name]+x}" ] || {
    echo "install-deps: unknown set '$set_name' (build, run, test, lint, bench, compose)" >&2
    exit 2
  }
  read -r -d '' -a words <<<"${sets[$set_name]}" || true
  packages+=("${words[@]}")
done
if [ $list_only = 1 ]; then
  printf '%s\n' "${packages[@]}" | sort -u
  exit 0
fi

missing=()
for p in $(printf '%s\n' "${packages[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps ($*): installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
