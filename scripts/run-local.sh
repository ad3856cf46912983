#!/usr/bin/env bash
# The local stack behind `make run`: control plane + one node agent that launches the hostpath
# CSI plugin (plugin id "hostpath"), as plain processes with all data under $MOORING_DATA.
# Secure by default: on the first start a CA and certificates are made under $MOORING_DATA/tls
# (`mooring tls`), the agents' gRPC runs over mutual TLS with the node's identity and the REST API
# serves HTTPS; MOORING_INSECURE=1 runs the old plaintext stack for experiments. The services'
# command lines come from scripts/lib/local-stack.sh (the defaults suite runs the same ones).
# Services run in their own sessions (setsid) so that this script stops them in order; their output
# goes to the terminal and to $MOORING_DATA/logs through tees that outlive a Ctrl-C
# (scripts/lib/services.sh). Stays in the foreground; Ctrl-C (or SIGTERM, or SIGHUP when the
# terminal goes away) shuts down gracefully: the agent first (it stops its allocations and
# unmounts their volumes), then the control plane, and says how each ended. A service that exits
# on its own is named with its exit code or signal and its last log lines, and the stack stops.
# Safe to run twice in a row; a second one while the first runs is refused (the address is served
# already, or the data dir is locked) and leaves the first stack alone.
set -euo pipefail
# shellcheck source=scripts/lib/local-stack.sh
. "$(dirname "$0")/lib/local-stack.sh"
# shellcheck source=scripts/lib/services.sh
. "$(dirname "$0")/lib/services.sh"

local_stack_prepare
if [ "$(id -u)" != 0 ]; then
  echo "run-local: warning: not root; the hostpath plugin cannot bind-mount volumes (run as root for a working stack)" >&2
fi
[ -z "$INSECURE" ] ||
  echo "run-local: MOORING_INSECURE is set: plaintext HTTP and gRPC, anyone who reaches the ports can act" >&2

# Another stack on this address (a second `make run`): its API would answer our health checks and
# the agent started next would be the second one on its data dir.
if curl -fsSk "https://$HTTP_ADDR/v1/status/health" >/dev/null 2>&1 ||
   curl -fsS "http://$HTTP_ADDR/v1/status/health" >/dev/null 2>&1; then
  echo "run-local: $HTTP_ADDR is already served (another 'make run'?); stop that one first" >&2
  exit 1
fi

CP_LOG=$DATA/logs/controlplane.log
AGENT_LOG=$DATA/logs/agent.log
declare -A SERVICE_PID=() TEE_PID=()
stop_all() {
  trap - INT TERM HUP
  echo
  echo "run-local: shutting down (agent first, then control plane)..."
  # drain_on_shutdown (20s) bounds the agent's wait for its volume releases.
  stop_service agent 300
  [ -z "$STOP_STATUS" ] || echo "run-local: the node agent stopped: it $(describe_exit "$STOP_STATUS")"
  stop_orphaned_plugins run-local "$DATA/agent"
  stop_service controlplane 100
  [ -z "$STOP_STATUS" ] || echo "run-local: the control plane stopped: it $(describe_exit "$STOP_STATUS")"
  wait_for_tees
  left=$(awk -v d="$DATA/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo || true)
  if [ -n "$left" ]; then
    echo "run-local: still mounted under $DATA:" >&2
    echo "$left" >&2
    exit 1
  fi
  echo "run-local: stopped; nothing left mounted under $DATA"
  exit "${EXIT_STATUS:-0}"
}
# service_exited NAME [STATUS]: a service that ended by itself: say how, then stop the other.
service_exited() {
  local name=$1 status=${2:-}
  if [ "$name" = controlplane ]; then
    report_exit run-local "control plane" controlplane "$CP_LOG" "$status"
  else
    report_exit run-local "node agent" agent "$AGENT_LOG" "$status"
  fi
  EXIT_STATUS=1
  stop_all
}
trap stop_all INT TERM HUP

start_service controlplane "$CP_LOG" "${CP_CMD[@]}"
for _ in $(seq 1 100); do
  # Only an answer while our control plane runs counts (another one may have won the race).
  "${CURL[@]}" -fsS "$API/v1/status/health" >/dev/null 2>&1 && kill -0 "${SERVICE_PID[controlplane]}" 2>/dev/null && break
  kill -0 "${SERVICE_PID[controlplane]}" 2>/dev/null || service_exited controlplane
  sleep 0.1
done
sleep 0.3  # a control plane refused by the data dir lock or the address exits within moments
kill -0 "${SERVICE_PID[controlplane]}" 2>/dev/null || service_exited controlplane

# ACLs: the first start bootstraps them and keeps the management token in $DATA/bootstrap-token
# (0600); later starts reuse it.
local_stack_bootstrap || { EXIT_STATUS=1; stop_all; }

start_service agent "$AGENT_LOG" "${AGENT_CMD[@]}"
# Ready when the control plane reports a healthy node instance of the plugin.
for _ in $(seq 1 150); do
  if "${CURL[@]}" -fsS "$API/v1/plugin/csi/hostpath" 2>/dev/null | grep -q '"NodesHealthy": *[1-9]'; then break; fi
  kill -0 "${SERVICE_PID[agent]}" 2>/dev/null || service_exited agent
  sleep 0.2
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The CLI is not installed: the paste line puts this build's on PATH, so "Try:" works as printed.
CLI_DIR=$(cd "$(dirname "$MOORING")" && pwd)
cat <<MSG

Mooring is running.
  REST API:   $API   (health: $API/v1/status/health)
  data:       $DATA   (logs in $DATA/logs; certificates in $TLS)

For the CLI, paste:
  export PATH=$CLI_DIR:\$PATH MOORING_ADDR=$API$( [ -n "$INSECURE" ] || echo " MOORING_CACERT=$TLS/ca.pem MOORING_TOKEN=\$(cat $TOKEN_FILE)" )

Try:
  mooring plugin status hostpath
  mooring volume create $ROOT/examples/volume-create.json
  mooring alloc run $ROOT/examples/alloc.json

Press Ctrl-C to stop (allocations are stopped and volumes unmounted first).
MSG

exited="" status=0
# (bash's own "Killed" notice to stderr is ours to word: service_exited says it)
wait -n -p exited "${SERVICE_PID[controlplane]}" "${SERVICE_PID[agent]}" 2>/dev/null || status=$?
if [ "$exited" = "${SERVICE_PID[controlplane]}" ]; then service_exited controlplane "$status"; else service_exited agent "$status"; fi
