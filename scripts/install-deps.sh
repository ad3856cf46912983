#!/usr/bin/env bash
# Installs the Debian 12 packages Mooring needs to build, test, run and benchmark, only
# when something is missing. Idempotent and quiet when everything is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libboost-url1.81-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  nlohmann-json3-dev libsqlite3-dev sqlite3 libssl-dev
  libgtest-dev libgmock-dev
  util-linux procps iproute2 curl
  iptables  # tests/chaos: partitions and one-way cuts inside the harness's network namespaces
  python3 python3-yaml yamllint docker-compose
  etcd-server etcd-client
  prometheus-cpp-dev prometheus
  chromium chromium-driver python3-selenium  # the dashboard's browser test (tests/dashboard)
)
if [ "${MOORING_BENCH_DEPS:-0}" = 1 ]; then
  packages+=(wrk nginx-light)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
