#include "services/nodeagent/config/agent_config_parts.hpp"

namespace mooring::nodeagent {
namespace config_parts {
namespace {

const std::vector<Option> kOptions{
    Option{"config", "MOORING_CONFIG", "", "FILE", "JSON config file (keys as listed below)", ""},
    Option{"node-id", "MOORING_NODE_ID", "node_id", "ID",
           "node id; default: generated once and kept in <data-dir>/node-id", ""},
    Option{"node-name", "MOORING_NODE_NAME", "node_name", "NAME", "human-readable node name", "the host name"},
    Option{"data-dir", "MOORING_DATA_DIR", "data_dir", "DIR",
           "plugin sockets, registry, node id, mount records, staging and publish paths", "/var/lib/mooring/agent"},
    Option{"controlplane-addr", "MOORING_CONTROLPLANE_ADDR", "controlplane_addr", "HOST:PORT[,HOST:PORT...]",
           "control plane gRPC address; with several control planes (etcd state) list them all: the agent follows "
           "the leader",
           "127.0.0.1:4701"},
    Option{"grpc-addr", "MOORING_GRPC_ADDR", "grpc_addr", "HOST:PORT",
           "the agent's own gRPC service (called by the control plane)", "127.0.0.1:4702"},
    Option{"metrics-addr", "MOORING_METRICS_ADDR", "metrics_addr", "HOST:PORT",
           "Prometheus metrics at GET /metrics: plain HTTP on a loopback address; on any other address HTTPS with "
           "the node's certificate, and scrapers must present a certificate of the cluster CA (needs the TLS files)",
           "127.0.0.1:4703"},
    Option{"metrics", "MOORING_METRICS", "metrics", "",
           "record Prometheus metrics and serve them; --metrics=off "
           "records nothing and opens no port",
           "on"},
    Option{"log-level", "MOORING_LOG_LEVEL", "log_level", "LEVEL", "debug|info|warn|error", "info"},
    Option{"log-format", "MOORING_LOG_FORMAT", "log_format", "FORMAT", "text|json", "text"},
    Option{"heartbeat-interval", "MOORING_HEARTBEAT_INTERVAL", "heartbeat_interval", "DURATION",
           "how often the agent heartbeats to the control plane", "5s"},
    Option{"claim-timeout", "MOORING_CLAIM_TIMEOUT", "claim_timeout", "DURATION",
           "how long an allocation keeps retrying a claim the volume's previous user still holds", "24h"},
    Option{"kill-timeout", "MOORING_KILL_TIMEOUT", "kill_timeout", "DURATION",
           "SIGTERM -> SIGKILL grace for a task that names no KillTimeout", "5s"},
    Option{"drain-on-shutdown", "MOORING_DRAIN_ON_SHUTDOWN", "drain_on_shutdown", "DURATION",
           "on SIGTERM, stop every allocation and wait up to this long for its volumes to be released "
           "(0: allocations keep running and are re-adopted after the restart; make run sets 20s)",
           "0"},
    Option{"status-batch-window", "MOORING_STATUS_BATCH_WINDOW", "status_batch_window", "DURATION",
           "allocation status reports within this window (or while a report is in flight) reach the control plane "
           "in one call; longer means fewer calls from a busy node and a later running in the API (0: at once; at "
           "most 10s)",
           "5ms"},
    Option{"volume-stats-interval", "MOORING_VOLUME_STATS_INTERVAL", "volume_stats_interval", "DURATION",
           "how often the usage and condition of every published volume are polled (NodeGetVolumeStats, "
           "plugins that advertise GET_VOLUME_STATS; the condition with VOLUME_CONDITION) and reported with the next "
           "heartbeat; also once for each fresh mount about a second after it (0: never; ?stats=refresh still asks)",
           "60s"},
    Option{"plugin", "MOORING_PLUGINS", "plugins", "SPEC",
           "a CSI plugin, repeatable; SPEC is id=ID,type=controller|node|monolith,command=PATH,arg=A,"
           "env=K=V,socket=PATH,health_timeout=30s,probe_interval=5s,fingerprint_interval=30s,"
           "stop_timeout=10s (arg/env repeatable; MOORING_PLUGINS separates specs with ';'); one id names one "
           "entry, or a controller and a node entry of a plugin split into two processes or sockets",
           ""},
    Option{"tls-ca-file", "MOORING_TLS_CA_FILE", "tls_ca_file", "FILE",
           "CA certificate for mutual TLS with the control plane (both directions)", ""},
    Option{"tls-cert-file", "MOORING_TLS_CERT_FILE", "tls_cert_file", "FILE",
           "this node's certificate (mooring tls cert create -agent -node-id ID); it names the node: without "
           "--node-id the agent takes its id from it, with --node-id they must agree",
           ""},
    Option{"tls-key-file", "MOORING_TLS_KEY_FILE", "tls_key_file", "FILE", "the key of --tls-cert-file", ""},
    Option{"insecure", "MOORING_INSECURE", "insecure", "",
           "plaintext gRPC without TLS files (anyone who reaches the port can call the agent); logs a warning",
           "false"},
    Option{"task-user", "MOORING_TASK_USER", "task_user", "USER",
           "the user tasks run as when they name none (a name, uid or uid:gid)", "nobody"},
    Option{"user-denylist", "MOORING_USER_DENYLIST", "user_denylist", "USER[,USER...]",
           "users no task may run as (names or uids; root also covers uid 0)", "root, or none with --allow-root"},
    Option{"allow-root", "MOORING_ALLOW_ROOT", "allow_root", "",
           "let tasks run as root (uid 0); the control plane places root tasks only on such nodes", "false"},
    Option{"task-isolation", "MOORING_TASK_ISOLATION", "task_isolation", "",
           "start tasks in their own mount, PID, IPC and UTS namespaces with a minimal root, no_new_privs and "
           "cgroup limits; off: a plain spawn as the task's user",
           "true"},
};

}  // namespace

const std::vector<Option>& options() { return kOptions; }

const Option* find_flag(std::string_view name) {
  for (const auto& o : kOptions) {
    if (o.flag == name) return &o;
  }
  return nullptr;
}

}  // namespace config_parts

std::string agent_config_help() {
  return config::help_text(
      "Usage: mooring-nodeagent [flags]\n\n"
      "Supervises CSI plugins on this node, fingerprints them and reports to the control plane.\n"
      "Settings come from flags, then MOORING_* environment variables, then the config file.\n",
      config_parts::options());
}

std::string agent_config_markdown() {
  return config::markdown_page(
      {.title = "mooring-nodeagent",
       .generated_by = "mooring-nodeagent --help-markdown",
       .intro = "The node agent supervises this node's CSI plugins, runs allocations and mounts their volumes.\n"
                "Each setting is a flag, a `MOORING_*` environment variable and a key of the JSON file named by\n"
                "`--config` (or `MOORING_CONFIG`; see `examples/agent.json`). Flags override the environment, which\n"
                "overrides the file. A bad or unknown value is an error that names the flag, variable or key.\n"
                "`mooring-nodeagent --help` prints the same list. In the file, `plugins` is an array of objects with\n"
                "the keys of the `--plugin` SPEC (`args` an array, `env` an object)."},
      config_parts::options());
}

}  // namespace mooring::nodeagent
