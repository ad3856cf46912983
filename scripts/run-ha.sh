#!/usr/bin/env bash
# The highly available local stack behind `make run-ha` (issue 22): three etcd members, three
# control planes on them (one leads, two stand by and forward) and one node agent that lists all
# three and follows the leader, as plain processes with all data under $MOORING_DATA (default
# ./.mooring-ha). Secure as `make run` (scripts/run-local.sh, whose steps this follows): a CA under
# $MOORING_DATA/tls, the control planes' server certificate from it (one for the three), the agent with
# its node's, HTTPS on the REST API, ACLs bootstrapped once (token in $MOORING_DATA/bootstrap-token),
# one keyring shared by the three control planes. etcd listens on loopback with mutual TLS from a CA
# of its own ($MOORING_DATA/tls/etcd): only the control planes' etcd client certificate reaches it,
# never an agent's or the CLI's (which the Mooring CA signs).
#   control planes  HTTP 127.0.0.1:4700, 4710, 4720   gRPC 4701, 4711, 4721
#   etcd clients    127.0.0.1:4731, 4741, 4751          peers 4732, 4742, 4752
#   agent           127.0.0.1:4702 (metrics 4703)
# MOORING_HA_PORT_BASE (default 4700) moves them all by the same offset (tests run beside `make run`).
# Stays in the foreground; Ctrl-C stops all (agent first, then control planes, then etcd). Kill a
# control plane (`kill -9 $(cat $MOORING_DATA/cp1.pid)`) to watch a standby take over.
set -euo pipefail
# shellcheck source=scripts/lib/agent-config.sh
. "$(dirname "$0")/lib/agent-config.sh"
# shellcheck source=scripts/lib/services.sh
. "$(dirname "$0")/lib/services.sh"

BIN=${MOORING_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/release}
DATA=${MOORING_DATA:-$(pwd)/.mooring-ha}
LOG_LEVEL=${MOORING_LOG_LEVEL:-info}
NODE_NAME=${MOORING_NODE_NAME:-local}
ETCD=${MOORING_ETCD:-/usr/bin/etcd}

CP=$BIN/services/controlplane/mooring-controlplane
AGENT=$BIN/services/nodeagent/mooring-nodeagent
HOSTPATH=$BIN/plugins/hostpath/mooring-hostpath
MOORING=$BIN/cli/mooring
for b in "$CP" "$AGENT" "$HOSTPATH" "$MOORING"; do
  [ -x "$b" ] || { echo "run-ha: $b is missing; run 'make build' first" >&2; exit 1; }
done
[ -x "$ETCD" ] || { echo "run-ha: $ETCD is missing; apt-get install etcd-server (make deps does)" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
  echo "run-ha: warning: not root; the hostpath plugin cannot bind-mount volumes (run as root for a working stack)" >&2
fi

MEMBERS=(0 1 2)
BASE=${MOORING_HA_PORT_BASE:-4700}
http_port() { echo $((BASE + 10 * $1)); }
grpc_port() { echo $((BASE + 1 + 10 * $1)); }
etcd_port() { echo $((BASE + 31 + 10 * $1)); }
FIRST=https://127.0.0.1:$(http_port 0)

mkdir -p "$DATA"/{agent,hostpath,logs,cp0,cp1,cp2}
chmod 0700 "$DATA"
for i in "${MEMBERS[@]}"; do
  if curl -fsSk "https://127.0.0.1:$(http_port "$i")/v1/status/health" >/dev/null 2>&1; then
    echo "run-ha: 127.0.0.1:$(http_port "$i") is already served (another 'make run' or 'make run-ha'?); stop that one first" >&2
    exit 1
  fi
done

[ -s "$DATA/agent/node-id" ] || cat /proc/sys/kernel/random/uuid > "$DATA/agent/node-id"
NODE_ID=$(tr -d ' \n' < "$DATA/agent/node-id")
TLS=$DATA/tls
ETCD_TLS=$TLS/etcd
if [ -d "$DATA/etcd0" ] && [ ! -f "$ETCD_TLS/ca.pem" ] && [ ! -f "$ETCD_TLS/ca/ca.pem" ]; then
  echo "run-ha: $DATA holds etcd members made before etcd had TLS; remove $DATA (or set MOORING_DATA) to start over" >&2
  exit 1
fi
# An older run-ha kept etcd's CA at etcd/ca.pem and a client certificate at etcd/client/server.pem:
# move the CA where the init keeps it (its member certificate stays valid); the init makes the
# client certificate again.
if [ -f "$ETCD_TLS/ca.pem" ] && [ ! -e "$ETCD_TLS/ca" ]; then
  mkdir -p "$ETCD_TLS/ca"
  mv "$ETCD_TLS/ca.pem" "$ETCD_TLS/ca-key.pem" "$ETCD_TLS/ca/"
  rm -f "$ETCD_TLS/client/server.pem" "$ETCD_TLS/client/server-key.pem"
fi
# The certificates the way compose and Kubernetes make them (docker/mooring-init.sh tls): the
# Mooring CA and the control planes' certificate (one for the three, as a Deployment's replicas
# share one Secret), and etcd's own CA with its members' and the control planes' client
# certificate (etcd-dir/ca, member, client; see docs/high-availability.md). Each only if absent.
INIT_OUT=$(MOORING="$MOORING" "$(dirname "$0")/../docker/mooring-init.sh" tls -dir "$TLS" \
  -etcd-dir "$ETCD_TLS" -etcd-dns localhost 2>&1) ||
  { echo "$INIT_OUT" >&2; echo "run-ha: making the certificates (docker/mooring-init.sh tls) failed" >&2; exit 1; }
[ -f "$TLS/agent-$NODE_ID.pem" ] || "$MOORING" tls cert create -agent -node-id "$NODE_ID" -dir "$TLS" >/dev/null
[ -f "$TLS/cli.pem" ] || "$MOORING" tls cert create -cli -dir "$TLS" >/dev/null
ETCD_MEMBER_TLS=(--cert-file "$ETCD_TLS/member/server.pem" --key-file "$ETCD_TLS/member/server-key.pem"
  --trusted-ca-file "$ETCD_TLS/member/ca.pem" --client-cert-auth
  --peer-cert-file "$ETCD_TLS/member/server.pem" --peer-key-file "$ETCD_TLS/member/server-key.pem"
  --peer-trusted-ca-file "$ETCD_TLS/member/ca.pem" --peer-client-cert-auth)
ETCD_CLIENT_TLS=(--etcd-cacert "$ETCD_TLS/client/ca.pem" --etcd-cert "$ETCD_TLS/client/client.pem"
  --etcd-key "$ETCD_TLS/client/client-key.pem")
CURL=(curl --cacert "$TLS/ca.pem")
TOKEN_FILE=$DATA/bootstrap-token

INITIAL=""
ENDPOINTS=""
for i in "${MEMBERS[@]}"; do
  INITIAL+="${INITIAL:+,}etcd$i=https://127.0.0.1:$(( $(etcd_port "$i") + 1 ))"
  ENDPOINTS+="${ENDPOINTS:+,}127.0.0.1:$(etcd_port "$i")"
done
CP_GRPC_ADDRS=""
for i in "${MEMBERS[@]}"; do CP_GRPC_ADDRS+="${CP_GRPC_ADDRS:+,}127.0.0.1:$(grpc_port "$i")"; done

AGENT_GRPC_ADDR=127.0.0.1:$((BASE + 2))
AGENT_METRICS_ADDR=127.0.0.1:$((BASE + 3))
write_agent_config "$DATA/agent.json" "$CP_GRPC_ADDRS" "$(agent_tls_json "$TLS" "$NODE_ID")"

# Every service (etcd members too) in SERVICE_PID; the control planes' and the agent's output also
# through a tee each that outlives a Ctrl-C (scripts/lib/services.sh).
declare -A SERVICE_PID=() TEE_PID=()
stop_all() {
  trap - INT TERM HUP
  echo
  echo "run-ha: shutting down (agent, control planes, etcd)..."
  stop_service agent 300
  [ -z "$STOP_STATUS" ] || echo "run-ha: the node agent stopped: it $(describe_exit "$STOP_STATUS")"
  stop_orphaned_plugins run-ha "$DATA/agent"
  for i in "${MEMBERS[@]}"; do
    stop_service "cp$i" 100
    [ -z "$STOP_STATUS" ] || echo "run-ha: control plane $i stopped: it $(describe_exit "$STOP_STATUS")"
  done
  for i in "${MEMBERS[@]}"; do stop_service "etcd$i" 50; done
  wait_for_tees
  rm -f "$DATA"/cp?.pid
  left=$(awk -v d="$DATA/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo || true)
  if [ -n "$left" ]; then
    echo "run-ha: still mounted under $DATA:" >&2
    echo "$left" >&2
    exit 1
  fi
  echo "run-ha: stopped; nothing left mounted under $DATA"
  exit "${EXIT_STATUS:-0}"
}
trap stop_all INT TERM HUP

for i in "${MEMBERS[@]}"; do
  client=https://127.0.0.1:$(etcd_port "$i")
  peer=https://127.0.0.1:$(( $(etcd_port "$i") + 1 ))
  setsid "$ETCD" --name "etcd$i" --data-dir "$DATA/etcd$i" --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "$INITIAL" \
    --initial-cluster-state new --initial-cluster-token mooring-ha "${ETCD_MEMBER_TLS[@]}" > "$DATA/logs/etcd$i.log" 2>&1 &
  SERVICE_PID[etcd$i]=$!
done

for i in "${MEMBERS[@]}"; do
  start_service "cp$i" "$DATA/logs/controlplane$i.log" "$CP" --data-dir "$DATA/cp$i" \
    --state "etcd://$ENDPOINTS/mooring" "${ETCD_CLIENT_TLS[@]}" --keyring-file "$DATA/keyring" \
    --http-addr "127.0.0.1:$(http_port "$i")" --grpc-addr "127.0.0.1:$(grpc_port "$i")" \
    --tls-ca-file "$TLS/ca.pem" --tls-cert-file "$TLS/server.pem" --tls-key-file "$TLS/server-key.pem" \
    --log-level "$LOG_LEVEL"
  echo "${SERVICE_PID[cp$i]}" > "$DATA/cp$i.pid"
  # The first start writes the shared keyring; the others read it.
  [ "$i" = 0 ] && for _ in $(seq 1 50); do [ -s "$DATA/keyring" ] && break; sleep 0.1; done
done

# Ready when one of them leads: any member names it.
API=""
for _ in $(seq 1 300); do
  for i in "${MEMBERS[@]}"; do
    kill -0 "${SERVICE_PID[cp$i]}" 2>/dev/null ||
      { report_exit run-ha "control plane $i" "cp$i" "$DATA/logs/controlplane$i.log"; EXIT_STATUS=1; stop_all; }
  done
  API=$("${CURL[@]}" -fsS "$FIRST/v1/status/leader" 2>/dev/null | tr -d '"') && [ -n "$API" ] && break
  sleep 0.1
done
[ -n "$API" ] || { echo "run-ha: no control plane became the leader; see $DATA/logs" >&2; EXIT_STATUS=1; stop_all; }

if [ ! -s "$TOKEN_FILE" ]; then
  answer=$("${CURL[@]}" -fsS -X POST "$FIRST/v1/acl/bootstrap") || {
    echo "run-ha: ACL bootstrap failed (was it done by hand? put the management SecretID in $TOKEN_FILE)" >&2
    EXIT_STATUS=1
    stop_all
  }
  (umask 077 && printf '%s\n' "$(printf '%s' "$answer" | sed -n 's/.*"SecretID": *"\([^"]*\)".*/\1/p')" > "$TOKEN_FILE")
fi
(umask 077 && printf 'X-Mooring-Token: %s\n' "$(cat "$TOKEN_FILE")" > "$DATA/.token-header")
CURL+=(-H "@$DATA/.token-header")

start_service agent "$DATA/logs/agent.log" "$AGENT" --config "$DATA/agent.json"
for _ in $(seq 1 150); do
  if "${CURL[@]}" -fsS "$FIRST/v1/plugin/csi/hostpath" 2>/dev/null | grep -q '"NodesHealthy": *[1-9]'; then break; fi
  kill -0 "${SERVICE_PID[agent]}" 2>/dev/null ||
    { report_exit run-ha "node agent" agent "$DATA/logs/agent.log"; EXIT_STATUS=1; stop_all; }
  sleep 0.2
done

# Running means every member answers and names the same leader: a standby whose etcd client has
# not connected yet answers "no leader: waiting for etcd", and the banner would be a promise too early.
for _ in $(seq 1 300); do
  names=()
  for i in "${MEMBERS[@]}"; do
    # `|| true`: a member not listening yet (or answering 503) fails curl, and under `set -e`
    # with pipefail that failed substitution would end the script instead of asking again.
    names+=("$("${CURL[@]}" -fsS "https://127.0.0.1:$(http_port "$i")/v1/status/leader" 2>/dev/null | tr -d '"' || true)")
  done
  agreed=$(printf '%s\n' "${names[@]}" | sort -u)
  [ -n "${names[0]}" ] && [ "$agreed" = "${names[0]}" ] && { API=$agreed; break; }
  agreed=""
  sleep 0.1
done
[ -n "$agreed" ] ||
  { echo "run-ha: the members do not name one leader (${names[*]}); see $DATA/logs" >&2; EXIT_STATUS=1; stop_all; }

cat <<MSG

Mooring HA is running: three control planes on a three-member etcd.
  leader:     $API   (ask any member: $FIRST/v1/status/leader)
  REST API:   $FIRST, :$(http_port 1), :$(http_port 2) (standbys forward to the leader)
  data:       $DATA   (logs in $DATA/logs; certificates in $TLS)

For the CLI, paste:
  export PATH=$(cd "$(dirname "$MOORING")" && pwd):\$PATH MOORING_ADDR=$FIRST MOORING_CACERT=$TLS/ca.pem MOORING_TOKEN=\$(cat $TOKEN_FILE)

Fail the leader over:  kill -9 \$(cat $DATA/cp<N>.pid)   (N: 0, 1 or 2; the leader is on port 47N0)
Press Ctrl-C to stop.
MSG

# Until Ctrl-C; a control plane that was killed by hand is not restarted (that is the demo).
report_exit run-ha "node agent" agent "$DATA/logs/agent.log"
EXIT_STATUS=1
stop_all
