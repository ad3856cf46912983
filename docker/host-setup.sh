#!/usr/bin/env bash
# Prepares the host directory through which docker/compose.yaml's agents and plugins share mounts
# (MOORING_COMPOSE_DATA, default /var/lib/mooring-compose), as root, before `up`:
#   - one directory per node (docker-compose 1.29 does not create a missing bind source);
#   - the directory on a shared mount: the agents and plugins bind their node's directory with
#     `rshared` propagation, which Docker refuses ("... is mounted on / but it is not a shared
#     mount") where the host's mount is private, as on hosts without systemd. Where the directory
#     is not shared already, it is bind-mounted onto itself and made shared: only it, not `/`.
# Idempotent. The bind mount stays until reboot or `umount "$MOORING_COMPOSE_DATA"`.
set -euo pipefail

data=${MOORING_COMPOSE_DATA:-/var/lib/mooring-compose}
[ "$(id -u)" = 0 ] || { echo "host-setup: run as root (mkdir and mount under $data)" >&2; exit 1; }
mkdir -p "$data"/node-1 "$data"/node-2 "$data"/node-ha-1
case "$(findmnt -no PROPAGATION --target "$data")" in
  shared*) ;;
  *)
    mountpoint -q "$data" || mount --bind "$data" "$data"
    mount --make-shared "$data"
    ;;
esac
echo "host-setup: $data is ready ($(findmnt -no PROPAGATION --target "$data") mount)"
