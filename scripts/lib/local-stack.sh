# shellcheck shell=bash
# shellcheck disable=SC2034  # CP_CMD, AGENT_CMD, API... are read by the sourcing script
# The stack `make run` starts, as data: sourced by scripts/run-local.sh, which runs it, and by the
# defaults suite (tests/defaults), which kills and restarts its services with these very command
# lines, so what the tests run cannot drift from what users run.
#
# local_stack_prepare: from the MOORING_* variables below (all optional), makes the data dirs,
# the node id, the certificates (secure unless MOORING_INSECURE is set) and the agent's config,
# and sets CP_CMD and AGENT_CMD (arrays: the services' command lines), API (the REST API's URL),
# CURL (an array: curl with the CA), TOKEN_FILE, INSECURE, TLS, DATA and the binaries' paths.
# Idempotent: files that exist are kept.
#   MOORING_BIN MOORING_DATA MOORING_HTTP_ADDR MOORING_CP_GRPC_ADDR MOORING_AGENT_GRPC_ADDR
#   MOORING_AGENT_METRICS_ADDR MOORING_NODE_NAME MOORING_LOG_LEVEL MOORING_INSECURE
# local_stack_bootstrap: with the control plane up, bootstraps ACLs once (the management token
# in $TOKEN_FILE, 0600) and adds the token header to CURL. Fails naming why.

# shellcheck source=scripts/lib/agent-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/agent-config.sh"

local_stack_prepare() {
  BIN=${MOORING_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/release}
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
  # The services read MOORING_INSECURE as a boolean (1/0, true/false, on/off, yes/no); so do we.
  INSECURE=""
  case "$(printf '%s' "${MOORING_INSECURE:-}" | tr '[:upper:]' '[:lower:]')" in
    ""|0|false|off|no) ;;
    1|true|on|yes) INSECURE=1 ;;
    *) echo "run-local: MOORING_INSECURE=${MOORING_INSECURE}: expected 1 or 0 (true/false, on/off, yes/no)" >&2
       return 1 ;;
  esac
  local b
  for b in "$CP" "$AGENT" "$HOSTPATH" "$MOORING"; do
    [ -x "$b" ] || { echo "run-local: $b is missing; run 'make build' first" >&2; return 1; }
  done

  mkdir -p "$DATA"/{controlplane,agent,hostpath,logs}
  chmod 0700 "$DATA"
  # The node id is kept in the agent's data dir (as the agent itself would keep it), so the
  # certificate made for it names the same node on every run.
  [ -s "$DATA/agent/node-id" ] || cat /proc/sys/kernel/random/uuid > "$DATA/agent/node-id"
  NODE_ID=$(tr -d ' \n' < "$DATA/agent/node-id")
  TLS=$DATA/tls
  TOKEN_FILE=$DATA/bootstrap-token
  local cp_tls agent_tls
  if [ -z "$INSECURE" ]; then
    [ -f "$TLS/ca.pem" ] || "$MOORING" tls ca create -dir "$TLS" >/dev/null
    [ -f "$TLS/server.pem" ] || "$MOORING" tls cert create -server -dir "$TLS" >/dev/null
    [ -f "$TLS/agent-$NODE_ID.pem" ] || "$MOORING" tls cert create -agent -node-id "$NODE_ID" -dir "$TLS" >/dev/null
    [ -f "$TLS/cli.pem" ] || "$MOORING" tls cert create -cli -dir "$TLS" >/dev/null
    API=https://$HTTP_ADDR
    CURL=(curl --cacert "$TLS/ca.pem")
    cp_tls=(--tls-ca-file "$TLS/ca.pem" --tls-cert-file "$TLS/server.pem" --tls-key-file "$TLS/server-key.pem")
    agent_tls=$(agent_tls_json "$TLS" "$NODE_ID")
  else
    API=http://$HTTP_ADDR
    CURL=(curl)
    cp_tls=(--insecure --acl=false)
    agent_tls='"insecure": true,'
  fi
  # The plugin is launched and supervised by the agent (CSI_ENDPOINT is set by it).
  write_agent_config "$DATA/agent.json" "$CP_GRPC_ADDR" "$agent_tls"
  CP_CMD=("$CP" --data-dir "$DATA/controlplane" --http-addr "$HTTP_ADDR" --grpc-addr "$CP_GRPC_ADDR"
          --log-level "$LOG_LEVEL" "${cp_tls[@]}")
  AGENT_CMD=("$AGENT" --config "$DATA/agent.json")
}

local_stack_bootstrap() {
  [ -z "$INSECURE" ] || return 0
  if [ ! -s "$TOKEN_FILE" ]; then
    local answer
    answer=$("${CURL[@]}" -fsS -X POST "$API/v1/acl/bootstrap") || {
      echo "run-local: ACL bootstrap failed (was it done by hand? put the management SecretID in $TOKEN_FILE)" >&2
      return 1
    }
    (umask 077 && printf '%s\n' "$(printf '%s' "$answer" | sed -n 's/.*"SecretID": *"\([^"]*\)".*/\1/p')" > "$TOKEN_FILE")
  fi
  # The header from a file (0600), so the token is not on a command line for `ps` to show.
  (umask 077 && printf 'X-Mooring-Token: %s\n' "$(cat "$TOKEN_FILE")" > "$DATA/.token-header")
  CURL+=(-H "@$DATA/.token-header")
}
