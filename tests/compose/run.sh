#!/usr/bin/env bash
# `make compose-test`: the compose stack for real (tests/compose/compose_test.py says what it
# checks). Installs what it needs first: a Docker engine (Debian's docker.io) unless one is
# installed, a compose (docker-compose 1.29) unless `docker compose` works, and mmdebstrap for
# base images where no registry is reachable. Not part of `make test`: on 2 cores the images'
# Release build alone takes most of an hour (docker/README.md records the times).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "compose-test: run as root (dockerd, mounts)" >&2; exit 1; }

scripts/install-deps.sh compose
extra=()
command -v dockerd >/dev/null || extra+=(docker.io)
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || extra+=(docker-compose)
if [ ${#extra[@]} -gt 0 ]; then
  echo "compose-test: installing ${extra[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${extra[@]}" >/dev/null
fi
exec python3 -u tests/compose/compose_test.py "$@"
