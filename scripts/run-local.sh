#!/usr/bin/env bash
# The local stack behind `make run`: control plane + one node agent that launches the hostpath
# CSI plugin (plugin id "hostpath"), as plain processes with all data under $MOORING_DATA.
# Secure by default: on the first start a CA and certificates are made under $MOORING_DATA/tls
# (`mooring tls`), the agents' gRPC runs over mutual TLS with the node's identity and the REST API
# serves HTTPS; MOORING_INSECURE=1 runs the old plaintext stack for experiments.
# Services run in their own sessions (setsid) so a terminal's Ctrl-C reaches only this script,
# which then stops them in order. Stays in the foreground; Ctrl-C (or SIGTERM, or SIGHUP when the
# terminal goes away) shuts down gracefully: the agent first (it stops its allocations and
# unmounts their volumes), then the control plane. Safe to run twice in a row; a second one while
# the first runs is refused (the address is served already, or the data dir is locked) and leaves
# the first stack alone.
set -euo pipefail
# shellcheck source=scripts/lib/agent-config.sh
. "$(dirname "$0")/lib/agent-config.sh"

BIN=${MOORING_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/release}
DATA=${MOORING_DATA:-$(pwd)/.mooring}
HTTP_ADDR=${MOORING_HTTP_ADDR:-127.0.0.1:4700}
CP_GRPC_ADDR=${MOORING_CP_GRPC_ADDR:-127.0.0.1:4701}
AGENT_GRPC_ADDR=${MOORING_AGENT_GRPC_ADDR:-127.0.0.1:4702}
AGENT_METRICS_ADDR=${MOORING_AGENT_METRICS_ADDR:-127.0.0.1:4703}
NODE_NAME=${MOORING_NODE_NAME:-local}
LOG_LEVEL=${MOORING_LOG_LEVEL:-info}

CP=$BIN/services/controlplane/mooring-controlplane
AGENT=$BIN/services/nodeagent/mooring-nodeagent
HOSTPATH=$BIN/plugins/hostpath/mooring-hostpath
MOORING=$BIN/cli/mooring
INSECURE=${MOORING_INSECURE:-}
for b in "$CP" "$AGENT" "$HOSTPATH" "$MOORING"; do
  [ -x "$b" ] || { echo "run-local: $b is missing; run 'make build' first" >&2; exit 1; }
done
if [ "$(id -u)" != 0 ]; then
  echo "run-local: warning: not root; the hostpath plugin cannot bind-mount volumes (run as root for a working stack)" >&2
fi

mkdir -p "$DATA"/{controlplane,agent,hostpath,logs}
chmod 0700 "$DATA"

# The node id is kept in the agent's data dir (as the agent itself would keep it), so the
# certificate made for it names the same node on every run.
[ -s "$DATA/agent/node-id" ] || cat /proc/sys/kernel/random/uuid > "$DATA/agent/node-id"
NODE_ID=$(tr -d ' \n' < "$DATA/agent/node-id")
TLS=$DATA/tls
if [ -z "$INSECURE" ]; then
  [ -f "$TLS/ca.pem" ] || "$MOORING" tls ca create -dir "$TLS" >/dev/null
  [ -f "$TLS/server.pem" ] || "$MOORING" tls cert create -server -dir "$TLS" >/dev/null
  [ -f "$TLS/agent-$NODE_ID.pem" ] || "$MOORING" tls cert create -agent -node-id "$NODE_ID" -dir "$TLS" >/dev/null
  [ -f "$TLS/cli.pem" ] || "$MOORING" tls cert create -cli -dir "$TLS" >/dev/null
  SCHEME=https
  CURL=(curl --cacert "$TLS/ca.pem")
  CP_TLS=(--tls-ca-file "$TLS/ca.pem" --tls-cert-file "$TLS/server.pem" --tls-key-file "$TLS/server-key.pem")
  AGENT_TLS=$(agent_tls_json "$TLS" "$NODE_ID")
else
  echo "run-local: MOORING_INSECURE is set: plaintext HTTP and gRPC, anyone who reaches the ports can act" >&2
  SCHEME=http
  CURL=(curl)
  CP_TLS=(--insecure --acl=false)
  AGENT_TLS='"insecure": true,'
fi
TOKEN_FILE=$DATA/bootstrap-token
API=$SCHEME://$HTTP_ADDR

# Agent config: the plugin is launched and supervised by the agent (CSI_ENDPOINT is set by it).
write_agent_config "$DATA/agent.json" "$CP_GRPC_ADDR" "$AGENT_TLS"

# Another stack on this address (a second `make run`): its API would answer our health checks and
# the agent started next would be the second one on its data dir.
if curl -fsSk "https://$HTTP_ADDR/v1/status/health" >/dev/null 2>&1 ||
   curl -fsS "http://$HTTP_ADDR/v1/status/health" >/dev/null 2>&1; then
  echo "run-local: $HTTP_ADDR is already served (another 'make run'?); stop that one first" >&2
  exit 1
fi

pids=()
stop_all() {
  trap - INT TERM HUP
  echo
  echo "run-local: shutting down (agent first, then control plane)..."
  if [ -n "${AGENT_PID:-}" ] && kill -0 "$AGENT_PID" 2>/dev/null; then
    kill -TERM "$AGENT_PID" 2>/dev/null || true
    # drain_on_shutdown (20s) bounds the agent's wait for its volume releases.
    for _ in $(seq 1 300); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  if [ -n "${CP_PID:-}" ] && kill -0 "$CP_PID" 2>/dev/null; then
    kill -TERM "$CP_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$CP_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  left=$(awk -v d="$DATA/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo || true)
  if [ -n "$left" ]; then
    echo "run-local: still mounted under $DATA:" >&2
    echo "$left" >&2
    exit 1
  fi
  echo "run-local: stopped; nothing left mounted under $DATA"
  exit "${EXIT_STATUS:-0}"
}
trap stop_all INT TERM HUP

setsid "$CP" --data-dir "$DATA/controlplane" --http-addr "$HTTP_ADDR" --grpc-addr "$CP_GRPC_ADDR" \
  --log-level "$LOG_LEVEL" "${CP_TLS[@]}" > >(tee -a "$DATA/logs/controlplane.log") 2>&1 &
CP_PID=$!
pids+=("$CP_PID")

cp_exited() {
  echo "run-local: the control plane exited: $(grep -E 'already running|cannot|refusing' "$DATA/logs/controlplane.log" | tail -n 1)" >&2
  echo "run-local: see $DATA/logs/controlplane.log" >&2
  exit 1  # nothing else was started yet
}
for _ in $(seq 1 100); do
  # Only an answer while our control plane runs counts (another one may have won the race).
  "${CURL[@]}" -fsS "$API/v1/status/health" >/dev/null 2>&1 && kill -0 "$CP_PID" 2>/dev/null && break
  kill -0 "$CP_PID" 2>/dev/null || cp_exited
  sleep 0.1
done
sleep 0.3  # a control plane refused by the data dir lock or the address exits within moments
kill -0 "$CP_PID" 2>/dev/null || cp_exited

# ACLs: the first start bootstraps them and keeps the management token in $DATA/bootstrap-token
# (0600); later starts reuse it.
if [ -z "$INSECURE" ]; then
  if [ ! -s "$TOKEN_FILE" ]; then
    answer=$("${CURL[@]}" -fsS -X POST "$API/v1/acl/bootstrap") || {
      echo "run-local: ACL bootstrap failed (was it done by hand? put the management SecretID in $TOKEN_FILE)" >&2
      EXIT_STATUS=1
      stop_all
    }
    (umask 077 && printf '%s\n' "$(printf '%s' "$answer" | sed -n 's/.*"SecretID": *"\([^"]*\)".*/\1/p')" > "$TOKEN_FILE")
  fi
  # The header from a file (0600), so the token is not on a command line for `ps` to show.
  (umask 077 && printf 'X-Mooring-Token: %s\n' "$(cat "$TOKEN_FILE")" > "$DATA/.token-header")
  CURL+=(-H "@$DATA/.token-header")
fi

setsid "$AGENT" --config "$DATA/agent.json" > >(tee -a "$DATA/logs/agent.log") 2>&1 &
AGENT_PID=$!
pids+=("$AGENT_PID")

# Ready when the control plane reports a healthy node instance of the plugin.
for _ in $(seq 1 150); do
  if "${CURL[@]}" -fsS "$API/v1/plugin/csi/hostpath" 2>/dev/null | grep -q '"NodesHealthy": *[1-9]'; then break; fi
  kill -0 "$AGENT_PID" 2>/dev/null || {
    echo "run-local: the node agent exited: $(grep -E 'already running|refusing' "$DATA/logs/agent.log" | tail -n 1)" >&2
    echo "run-local: see $DATA/logs/agent.log" >&2
    EXIT_STATUS=1
    stop_all
  }
  sleep 0.2
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cat <<MSG

Mooring is running.
  REST API:   $API   (health: $API/v1/status/health)
  data:       $DATA   (logs in $DATA/logs; certificates in $TLS)

For the CLI, paste:
  export MOORING_ADDR=$API$( [ -n "$INSECURE" ] || echo " MOORING_CACERT=$TLS/ca.pem MOORING_TOKEN=\$(cat $TOKEN_FILE)" )

Try:
  mooring plugin status hostpath
  mooring volume create $ROOT/examples/volume-create.json
  mooring alloc run $ROOT/examples/alloc.json

Press Ctrl-C to stop (allocations are stopped and volumes unmounted first).
MSG

wait -n "$CP_PID" "$AGENT_PID" || true
echo "run-local: a service exited on its own; see $DATA/logs" >&2
EXIT_STATUS=1
stop_all
