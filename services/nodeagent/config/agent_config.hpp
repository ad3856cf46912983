// The node agent's configuration: a JSON file, environment variables and flags, merged with
// flags winning over the environment winning over the file. Parsing is pure (no I/O besides
// reading the named config file), so it is unit-tested directly.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "shared/domain/task_user.hpp"

namespace mooring::nodeagent {

enum class PluginRole { controller, node, monolith };
std::string_view to_string(PluginRole role);
std::optional<PluginRole> parse_plugin_role(std::string_view text);

struct PluginConfig {
  std::string id;
  PluginRole type = PluginRole::monolith;
  // Either a command the agent launches (and restarts) ...
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  // ... or the socket of a plugin someone else runs (a sidecar container).
  std::string socket;
  std::chrono::milliseconds health_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds probe_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds fingerprint_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds stop_timeout{std::chrono::seconds(10)};  // SIGTERM -> SIGKILL

  bool launched() const { return socket.empty(); }
};

struct AgentConfig {
  std::string config_file;
  std::string node_id;  // empty: generated once and persisted in the data dir
  std::string node_name;
  std::string data_dir = "/var/lib/mooring/agent";
  std::string controlplane_addr = "127.0.0.1:4701";
  std::string grpc_addr = "127.0.0.1:4702";
  // Prometheus metrics (GET /metrics): see metrics/metrics_listener.hpp for how it is protected.
  std::string metrics_addr = "127.0.0.1:4703";
  bool metrics = true;  // --metrics=off: nothing is recorded, no port is opened
  std::string log_level = "info";
  std::string log_format = "text";
  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(5)};
  // How long the CSI hook retries a claim refused because the volume's previous allocation still
  // holds it (seed 004). Nomad's 24 h: time for an operator to repair a stuck release; stopping
  // the allocation ends the wait at once.
  std::chrono::milliseconds claim_timeout{std::chrono::hours(24)};
  std::chrono::milliseconds kill_timeout{std::chrono::seconds(5)};  // for tasks without KillTimeout
  // Drain mode (`make run`, a node being retired): on shutdown every allocation is stopped and the
  // agent waits up to this long for their volumes to be released. 0 (the default, as in Nomad):
  // allocations keep running through an agent restart and are re-adopted.
  std::chrono::milliseconds drain_on_shutdown{0};
  // Allocation status reports arriving within this window go to the control plane in one call
  // (so do those arriving while a call is in flight). Longer: fewer calls from a busy node, later
  // "running" in the API. 0: send at once. At most 10 s.
  std::chrono::milliseconds status_batch_window{std::chrono::milliseconds(5)};
  // How often every published volume's NodeGetVolumeStats is polled (node plugins that advertise
  // GET_VOLUME_STATS) and its usage and condition reported with the next heartbeat. 0: never.
  std::chrono::milliseconds volume_stats_interval{std::chrono::seconds(60)};
  std::vector<PluginConfig> plugins;
  // Mutual TLS with the control plane, both directions (all three, or none): the CA, and this
  // node's certificate and key (`mooring tls cert create -agent -node-id ID`). The certificate
  // names the node: without --node-id the agent takes its id from it.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  bool insecure = false;  // plaintext gRPC on purpose (no warning about missing TLS files)
  // Who tasks run as (shared/domain/task_user.hpp): the default user, users refused (unset: root,
  // or none once allow_root is on), and whether uid 0 may run at all (off, like Nomad's raw_exec).
  std::string task_user = "nobody";
  std::optional<std::vector<std::string>> user_denylist;
  bool allow_root = false;
  // Tasks start behind their own namespaces (process/walls.hpp). Off only for a node
  // whose operator says so (a machine without the privileges, or to measure the difference).
  bool task_isolation = true;
};

// The task user rules this configuration sets, as the control plane sees them.
domain::TaskUserRules task_user_rules(const AgentConfig& cfg);

struct ConfigError {
  std::string message;  // names the offending key and value
};

// What the command line asked for.
struct ParsedArgs {
  bool help = false;
  bool help_markdown = false;  // --help-markdown: print docs/configuration/nodeagent.md
  AgentConfig config;
};

// argv[0] is skipped. `env` is the process environment (name -> value); only MOORING_* names are
// read. Returns the merged configuration or an error naming the bad key/value.
std::variant<ParsedArgs, ConfigError> parse_agent_config(const std::vector<std::string>& argv,
                                                         const std::map<std::string, std::string>& env);

// The --help text: every flag, its environment variable, the config file key and the default.
std::string agent_config_help();
// --help-markdown: the same table as the reference page docs/configuration/nodeagent.md.
std::string agent_config_markdown();

// "30s", "500ms", "2m", "1h", "1.5s"; a bare number is seconds.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// Ids that become paths under the data dir: [A-Za-z0-9._-], 1..64 chars, not "." or "..".
bool is_valid_plugin_id(std::string_view id);

}  // namespace mooring::nodeagent
