#!/usr/bin/env bash
# Makes the Debian base images docker/Dockerfile builds on, from Debian's packages, for a machine
# that reaches Debian's mirror but no image registry: mmdebstrap writes a bookworm root file
# system as a tar and `docker import` turns it into an image. Prints the two image names, one a
# line (build base, runtime base); an image that exists already is kept.
#
#   tests/compose/base-images.sh [PREFIX]     (default PREFIX: mooring-local/debian)
#
# The images are tagged PREFIX:bookworm (minbase, for the build stage) and PREFIX:bookworm-slim
# (minbase without documentation and locales, for the runtime stages) rather than debian:*, so a
# locally made image never passes for Docker Hub's. Pass them as the BASE_IMAGE and
# RUNTIME_BASE_IMAGE build arguments (compose: MOORING_BASE_IMAGE, MOORING_RUNTIME_BASE_IMAGE).
set -euo pipefail

prefix=${1:-mooring-local/debian}
mirror=${MOORING_DEBIAN_MIRROR:-http://deb.debian.org}
sources=(
  "deb $mirror/debian bookworm main"
  "deb $mirror/debian bookworm-updates main"
  "deb $mirror/debian-security bookworm-security main"
)
# The -slim variant's dpkg filter, as Docker Hub's debian:*-slim images have it.
slim_filter=(
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
)

command -v mmdebstrap >/dev/null || {
  echo "base-images: mmdebstrap is missing (apt-get install mmdebstrap)" >&2
  exit 1
}

make_image() { # make_image TAG [mmdebstrap options...]
  local tag=$1
  shift
  if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag"
    return
  fi
  echo "base-images: making $tag with mmdebstrap" >&2
  mmdebstrap --quiet --variant=minbase "$@" bookworm - "${sources[@]}" \
    | docker import --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
  echo "$tag"
}

make_image "$prefix:bookworm"
make_image "$prefix:bookworm-slim" "${slim_filter[@]}"
