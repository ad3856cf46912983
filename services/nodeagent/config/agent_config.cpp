#include "services/nodeagent/config/agent_config.hpp"

#include "shared/config/host_port.hpp"
#include "shared/config/settings.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

using json = nlohmann::json;

// One row per setting: the flag, its environment variable, the key in the config file.
using Option = config::Doc;

constexpr std::array kOptions{
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

const Option* find_flag(std::string_view name) {
  for (const auto& o : kOptions) {
    if (o.flag == name) return &o;
  }
  return nullptr;
}

bool is_valid_id(std::string_view id, size_t max_len) {
  if (id.empty() || id.size() > max_len || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '_' || c == '-'; });
}

std::string qt(std::string_view s) { return json(std::string(s)).dump(); }

struct Fail {
  std::string message;
};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

// The --plugin short form, turned into the same JSON object the config file uses.
json plugin_spec_to_json(std::string_view spec, std::string_view origin) {
  json p = json::object();
  bool first = true;
  for (const auto& part : split(spec, ',')) {
    if (part.empty()) continue;
    const auto eq = part.find('=');
    if (eq == std::string::npos) {
      if (!first) throw Fail{std::string(origin) + ": " + qt(part) + " is not key=value"};
      p["id"] = part;
      first = false;
      continue;
    }
    first = false;
    const std::string key = part.substr(0, eq);
    const std::string value = part.substr(eq + 1);
    if (key == "arg") {
      p["args"].push_back(value);
    } else if (key == "env") {
      const auto e = value.find('=');
      if (e == std::string::npos || e == 0)
        throw Fail{std::string(origin) + ": env " + qt(value) + " is not NAME=VALUE"};
      p["env"][value.substr(0, e)] = value.substr(e + 1);
    } else {
      p[key] = value;
    }
  }
  return p;
}

std::string get_string(const json& obj, const std::string& key, const std::string& path) {
  const auto& v = obj.at(key);
  if (!v.is_string()) throw Fail{path + ": expected a string, got " + v.dump()};
  return v.get<std::string>();
}

// `zero_ok`: 0 is a meaningful value (drain_on_shutdown 0 = do not drain), not a mistake.
std::chrono::milliseconds get_duration(const json& obj, const std::string& key, const std::string& path,
                                       bool zero_ok = false) {
  const auto& v = obj.at(key);
  std::optional<std::chrono::milliseconds> d;
  if (v.is_number()) {
    const double secs = v.get<double>();
    if (secs >= 0 && std::isfinite(secs)) d = std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
  } else if (v.is_string()) {
    d = parse_duration(v.get<std::string>());
  }
  if (!d) throw Fail{path + ": " + v.dump() + " is not a duration (like \"30s\", \"500ms\", \"2m\")"};
  if (d->count() < 0 || (d->count() == 0 && !zero_ok))
    throw Fail{path + ": " + v.dump() + " must be greater than zero"};
  return *d;
}

PluginConfig decode_plugin(const json& p, const std::string& path) {
  if (!p.is_object()) throw Fail{path + ": expected an object, got " + p.dump()};
  PluginConfig pc;
  static const std::set<std::string> known{"id",
                                           "type",
                                           "command",
                                           "args",
                                           "env",
                                           "socket",
                                           "health_timeout",
                                           "probe_interval",
                                           "fingerprint_interval",
                                           "stop_timeout"};
  for (const auto& [k, _] : p.items()) {
    if (!known.contains(k)) throw Fail{path + ": unknown key " + qt(k)};
  }
  if (!p.contains("id")) throw Fail{path + ": missing \"id\""};
  pc.id = get_string(p, "id", path + ".id");
  if (!is_valid_plugin_id(pc.id))
    throw Fail{path + ".id: " + qt(pc.id) + " must be 1-64 characters of [A-Za-z0-9._-] and not \".\" or \"..\""};
  const std::string where = path + " (plugin " + qt(pc.id) + ")";
  if (!p.contains("type")) throw Fail{where + ": missing \"type\" (controller|node|monolith)"};
  const auto type = get_string(p, "type", path + ".type");
  const auto role = parse_plugin_role(type);
  if (!role) throw Fail{path + ".type: " + qt(type) + " is not one of controller|node|monolith"};
  pc.type = *role;
  if (p.contains("command")) pc.command = get_string(p, "command", path + ".command");
  if (p.contains("socket")) pc.socket = get_string(p, "socket", path + ".socket");
  if (pc.command.empty() == pc.socket.empty())
    throw Fail{where +
               ": exactly one of \"command\" (launched by the agent) or \"socket\" (run by someone else) is required"};
  if (!pc.socket.empty() && pc.socket.starts_with("unix://")) pc.socket = pc.socket.substr(7);
  if (p.contains("args")) {
    const auto& a = p.at("args");
    if (!a.is_array()) throw Fail{path + ".args: expected an array of strings, got " + a.dump()};
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string())
        throw Fail{path + ".args[" + std::to_string(i) + "]: expected a string, got " + a[i].dump()};
      pc.args.push_back(a[i].get<std::string>());
    }
    if (!pc.socket.empty() && !pc.args.empty()) throw Fail{where + ": \"args\" needs \"command\""};
  }
  if (p.contains("env")) {
    const auto& e = p.at("env");
    if (!e.is_object()) throw Fail{path + ".env: expected an object of strings, got " + e.dump()};
    for (const auto& [k, v] : e.items()) {
      if (!v.is_string()) throw Fail{path + ".env." + k + ": expected a string, got " + v.dump()};
      if (k == "CSI_ENDPOINT") throw Fail{path + ".env.CSI_ENDPOINT: set by the agent, do not configure it"};
      pc.env[k] = v.get<std::string>();
    }
  }
  if (p.contains("health_timeout")) pc.health_timeout = get_duration(p, "health_timeout", path + ".health_timeout");
  if (p.contains("probe_interval")) pc.probe_interval = get_duration(p, "probe_interval", path + ".probe_interval");
  if (p.contains("fingerprint_interval"))
    pc.fingerprint_interval = get_duration(p, "fingerprint_interval", path + ".fingerprint_interval");
  if (p.contains("stop_timeout")) pc.stop_timeout = get_duration(p, "stop_timeout", path + ".stop_timeout");
  return pc;
}

// Adds `incoming` plugins to `out`; the entries of an id already present are replaced by the
// incoming ones of that id (the later source wins, as for every other setting, and a split
// plugin's pair is replaced as one).
void merge_plugins(std::vector<PluginConfig>& out, const std::vector<PluginConfig>& incoming) {
  std::vector<PluginConfig> merged;
  std::set<std::string> emitted;
  auto emit_incoming = [&](const std::string& id) {
    if (!emitted.insert(id).second) return;
    for (const auto& p : incoming)
      if (p.id == id) merged.push_back(p);
  };
  std::set<std::string> replaced;
  for (const auto& p : incoming) replaced.insert(p.id);
  for (auto& q : out) {
    if (replaced.contains(q.id))
      emit_incoming(q.id);  // in the place of the entries it replaces
    else
      merged.push_back(std::move(q));
  }
  for (const auto& p : incoming) emit_incoming(p.id);  // new ids, in their order
  out = std::move(merged);
}

// One id may name one plugin entry, or exactly one controller and one node entry: a plugin
// shipped as separate controller and node processes (or sockets) on one node, as Kubernetes and
// Nomad allow. Two of one type, or a monolith beside another entry, would serve one service twice.
void check_split_pair(const PluginConfig& first, const PluginConfig& second, const std::string& path) {
  const bool pair = (first.type == PluginRole::controller && second.type == PluginRole::node) ||
                    (first.type == PluginRole::node && second.type == PluginRole::controller);
  if (!pair)
    throw Fail{path + ": plugin id " + qt(first.id) + " appears twice (as " + std::string(to_string(first.type)) +
               " and " + std::string(to_string(second.type)) +
               "); one id may only name one controller and one node instance"};
  if (!first.socket.empty() && first.socket == second.socket)
    throw Fail{path + ": plugin " + qt(first.id) + ": its controller and node entries name the same socket " +
               qt(first.socket) + "; one socket serving both is type=monolith"};
}

std::vector<PluginConfig> decode_plugin_list(const json& list, const std::string& path) {
  if (!list.is_array()) throw Fail{path + ": expected an array, got " + list.dump()};
  std::vector<PluginConfig> out;
  std::map<std::string, std::vector<const PluginConfig*>> by_id;
  for (size_t i = 0; i < list.size(); ++i) out.push_back(decode_plugin(list[i], path + "[" + std::to_string(i) + "]"));
  for (const auto& pc : out) by_id[pc.id].push_back(&pc);
  for (const auto& [id, entries] : by_id) {
    if (entries.size() == 2) check_split_pair(*entries[0], *entries[1], path);
    if (entries.size() > 2)
      throw Fail{path + ": plugin id " + qt(id) + " appears " + std::to_string(entries.size()) +
                 " times; one id may only name one controller and one node instance"};
  }
  return out;
}

// A list of users: a JSON array of strings (config file) or one comma-separated string (flag, env).
std::vector<std::string> get_user_list(const json& value, const std::string& path) {
  std::vector<std::string> out;
  if (value.is_string()) {
    for (auto& item : split(value.get<std::string>(), ','))
      if (!item.empty()) out.push_back(std::move(item));
    return out;
  }
  if (!value.is_array()) throw Fail{path + ": expected a list of users, got " + value.dump()};
  for (const auto& item : value) {
    if (!item.is_string()) throw Fail{path + ": expected a user name or uid, got " + item.dump()};
    out.push_back(item.get<std::string>());
  }
  return out;
}

// Applies one layer (file, environment or flags) of scalar settings and plugins.
void apply_layer(AgentConfig& cfg, const json& layer, const std::string& origin) {
  for (const auto& [key, value] : layer.items()) {
    const std::string path = origin + ": " + key;
    if (key == "plugins") {
      merge_plugins(cfg.plugins, decode_plugin_list(value, origin + ": plugins"));
      continue;
    }
    if (key == "heartbeat_interval") {
      cfg.heartbeat_interval = get_duration(layer, key, path);
      continue;
    }
    if (key == "claim_timeout") {
      cfg.claim_timeout = get_duration(layer, key, path);
      continue;
    }
    if (key == "kill_timeout") {
      cfg.kill_timeout = get_duration(layer, key, path);
      continue;
    }
    if (key == "drain_on_shutdown") {
      cfg.drain_on_shutdown = get_duration(layer, key, path, /*zero_ok=*/true);
      continue;
    }
    if (key == "status_batch_window") {
      cfg.status_batch_window = get_duration(layer, key, path, /*zero_ok=*/true);
      if (cfg.status_batch_window > std::chrono::seconds(10))
        throw Fail{path + ": " + layer.at(key).dump() +
                   " must be at most 10s (reports would reach the control plane late)"};
      continue;
    }
    if (key == "volume_stats_interval") {
      cfg.volume_stats_interval = get_duration(layer, key, path, /*zero_ok=*/true);
      continue;
    }
    if (bool* flag = key == "metrics"          ? &cfg.metrics
                     : key == "insecure"       ? &cfg.insecure
                     : key == "allow_root"     ? &cfg.allow_root
                     : key == "task_isolation" ? &cfg.task_isolation
                                               : nullptr) {
      *flag = config::json_bool(layer.at(key), path);
      continue;
    }
    if (key == "user_denylist") {
      cfg.user_denylist = get_user_list(layer.at(key), path);
      continue;
    }
    std::string* target = nullptr;
    if (key == "node_id")
      target = &cfg.node_id;
    else if (key == "tls_ca_file")
      target = &cfg.tls_ca_file;
    else if (key == "tls_cert_file")
      target = &cfg.tls_cert_file;
    else if (key == "tls_key_file")
      target = &cfg.tls_key_file;
    else if (key == "node_name")
      target = &cfg.node_name;
    else if (key == "data_dir")
      target = &cfg.data_dir;
    else if (key == "controlplane_addr")
      target = &cfg.controlplane_addr;
    else if (key == "grpc_addr")
      target = &cfg.grpc_addr;
    else if (key == "metrics_addr")
      target = &cfg.metrics_addr;
    else if (key == "log_level")
      target = &cfg.log_level;
    else if (key == "log_format")
      target = &cfg.log_format;
    else if (key == "task_user")
      target = &cfg.task_user;
    if (!target) throw Fail{origin + ": unknown key " + qt(key)};
    *target = get_string(layer, key, path);
  }
}

void validate(const AgentConfig& cfg) {
  log::Level level;
  if (!log::parse_level(cfg.log_level, level))
    throw Fail{"log_level: " + qt(cfg.log_level) + " is not one of debug|info|warn|error"};
  log::Format format;
  if (!log::parse_format(cfg.log_format, format))
    throw Fail{"log_format: " + qt(cfg.log_format) + " is not one of text|json"};
  if (cfg.data_dir.empty()) throw Fail{"data_dir: must not be empty"};
  if (!cfg.node_id.empty() && !is_valid_id(cfg.node_id, 128))
    throw Fail{"node_id: " + qt(cfg.node_id) + " must be 1-128 characters of [A-Za-z0-9._-]"};
  const bool any_tls = !cfg.tls_ca_file.empty() || !cfg.tls_cert_file.empty() || !cfg.tls_key_file.empty();
  const bool all_tls = !cfg.tls_ca_file.empty() && !cfg.tls_cert_file.empty() && !cfg.tls_key_file.empty();
  if (any_tls && !all_tls) throw Fail{"mutual TLS needs all of --tls-ca-file, --tls-cert-file and --tls-key-file"};
  if (any_tls && cfg.insecure) throw Fail{"--insecure and the --tls-* files exclude each other: choose one"};
  for (const auto* addr : {&cfg.controlplane_addr, &cfg.grpc_addr}) {
    if (addr->empty())
      throw Fail{std::string(addr == &cfg.grpc_addr ? "grpc_addr" : "controlplane_addr") + ": must not be empty"};
  }
  if (auto u = domain::parse_task_user(cfg.task_user); !u) throw Fail{"task_user: " + u.error()};
  for (const auto& user : cfg.user_denylist.value_or(std::vector<std::string>{}))
    if (auto u = domain::parse_task_user(user); !u) throw Fail{"user_denylist: " + u.error()};
  if (auto refused = domain::refused_user("", task_user_rules(cfg)))
    throw Fail{"task_user: the default user is refused by this node's own rules: " + *refused};
  if (cfg.metrics) {
    if (!config::parse_host_port(cfg.metrics_addr))
      throw Fail{"metrics_addr: " + qt(cfg.metrics_addr) + " is not HOST:PORT"};
  }
}

}  // namespace

std::string_view to_string(PluginRole role) {
  switch (role) {
    case PluginRole::controller: return "controller";
    case PluginRole::node: return "node";
    case PluginRole::monolith: return "monolith";
  }
  return "unknown";
}

std::optional<PluginRole> parse_plugin_role(std::string_view text) {
  if (text == "controller") return PluginRole::controller;
  if (text == "node") return PluginRole::node;
  if (text == "monolith") return PluginRole::monolith;
  return std::nullopt;
}

bool is_valid_plugin_id(std::string_view id) { return is_valid_id(id, 64); }

domain::TaskUserRules task_user_rules(const AgentConfig& cfg) {
  domain::TaskUserRules rules;
  rules.default_user = cfg.task_user;
  rules.allow_root = cfg.allow_root;
  rules.denylist =
      cfg.user_denylist.value_or(cfg.allow_root ? std::vector<std::string>{} : std::vector<std::string>{"root"});
  return rules;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(std::string(text.substr(0, i)), &used);
    if (used != i) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string_view unit = text.substr(i);
  double ms = 0;
  if (unit.empty() || unit == "s")
    ms = value * 1000;
  else if (unit == "ms")
    ms = value;
  else if (unit == "m")
    ms = value * 60'000;
  else if (unit == "h")
    ms = value * 3'600'000;
  else
    return std::nullopt;
  if (!std::isfinite(ms) || ms > 1e15) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

std::variant<ParsedArgs, ConfigError> parse_agent_config(const std::vector<std::string>& argv,
                                                         const std::map<std::string, std::string>& env) {
  try {
    ParsedArgs out;
    // --help anywhere wins, even next to a bad flag: the user is asking how to fix it.
    if (config::wants_help(argv)) {
      out.help = true;
      return out;
    }
    if (config::wants_markdown(argv)) {
      out.help_markdown = true;
      return out;
    }
    // Flags first into a JSON layer (so every source goes through one decoder).
    json flags = json::object();
    std::string config_file;
    for (auto& [name, value] : config::split_flags(argv, {"insecure", "metrics", "allow-root", "task-isolation"})) {
      const Option* opt = find_flag(name);
      if (!opt) throw Fail{"unknown flag --" + name + " (see --help)"};
      if (opt->flag == "config") {
        config_file = value;
      } else if (opt->flag == "plugin") {
        flags["plugins"].push_back(plugin_spec_to_json(value, "--plugin " + qt(value)));
      } else {
        flags[std::string(opt->key)] = value;
      }
    }

    json env_layer = json::object();
    for (const auto& opt : kOptions) {
      const auto it = env.find(std::string(opt.env));
      if (it == env.end()) continue;
      if (opt.flag == "config") {
        if (config_file.empty()) config_file = it->second;
      } else if (opt.flag == "plugin") {
        for (const auto& spec : split(it->second, ';')) {
          if (!spec.empty()) env_layer["plugins"].push_back(plugin_spec_to_json(spec, std::string(opt.env)));
        }
      } else {
        env_layer[std::string(opt.key)] = it->second;
      }
    }

    AgentConfig& cfg = out.config;
    if (!config_file.empty()) {
      cfg.config_file = config_file;
      const json file = config::read_file(config_file);
      apply_layer(cfg, file, "config file " + qt(config_file));
    }
    apply_layer(cfg, env_layer, "environment");
    apply_layer(cfg, flags, "flags");
    validate(cfg);
    return out;
  } catch (const Fail& f) {
    return ConfigError{f.message};
  } catch (const config::Error& e) {
    return ConfigError{e.message};
  }
}

std::string agent_config_help() {
  return config::help_text(
      "Usage: mooring-nodeagent [flags]\n\n"
      "Supervises CSI plugins on this node, fingerprints them and reports to the control plane.\n"
      "Settings come from flags, then MOORING_* environment variables, then the config file.\n",
      std::vector<config::Doc>(kOptions.begin(), kOptions.end()));
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
      std::vector<config::Doc>(kOptions.begin(), kOptions.end()));
}

}  // namespace mooring::nodeagent
