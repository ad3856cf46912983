# shellcheck shell=bash
# Sourced by scripts/run-local.sh (`make run`) and scripts/run-ha.sh (`make run-ha`): the node
# agent's config file of the local stacks, written in one place so the two cannot drift.
#
# write_agent_config FILE CONTROLPLANE_ADDRS TLS_JSON
#   CONTROLPLANE_ADDRS  "host:port[,host:port...]" (every control plane: the agent follows the leader)
#   TLS_JSON            the TLS keys as a JSON fragment ending in a comma: agent_tls_json's output,
#                       or '"insecure": true,' for the plaintext stack
# and these variables: NODE_NAME NODE_ID DATA (the agent's data is $DATA/agent, the plugin's
# $DATA/hostpath) AGENT_GRPC_ADDR LOG_LEVEL HOSTPATH (the plugin binary, which the agent launches
# and supervises; it sets CSI_ENDPOINT), and AGENT_METRICS_ADDR if set.
write_agent_config() {
  local file=$1 controlplanes=$2 tls=$3 metrics=''
  [ -z "${AGENT_METRICS_ADDR:-}" ] || metrics="\"metrics_addr\": \"$AGENT_METRICS_ADDR\","
  cat > "$file" <<JSON
{
  "node_name": "$NODE_NAME",
  "node_id": "$NODE_ID",
  $tls
  "data_dir": "$DATA/agent",
  "controlplane_addr": "$controlplanes",
  "grpc_addr": "$AGENT_GRPC_ADDR",
  $metrics
  "log_level": "$LOG_LEVEL",
  "drain_on_shutdown": "20s",
  "plugins": [
    {
      "id": "hostpath",
      "type": "monolith",
      "command": "$HOSTPATH",
      "args": ["--mode", "monolith", "--data-dir", "$DATA/hostpath", "--node-id", "$NODE_NAME",
               "--log-level", "$LOG_LEVEL"]
    }
  ]
}
JSON
}

# agent_tls_json TLS_DIR NODE_ID: the agent's TLS keys for the files `mooring tls cert create
# -agent -node-id NODE_ID -dir TLS_DIR` makes (and the CA beside them).
agent_tls_json() {
  local dir=$1 node=$2
  printf '"tls_ca_file": "%s/ca.pem", "tls_cert_file": "%s/agent-%s.pem", "tls_key_file": "%s/agent-%s-key.pem",' \
    "$dir" "$dir" "$node" "$dir" "$node"
}
