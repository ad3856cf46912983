#include "services/nodeagent/config/agent_config.hpp"

#include "services/nodeagent/config/agent_config_parts.hpp"
#include "shared/config/host_port.hpp"
#include "shared/config/settings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace config_parts {

bool is_valid_id(std::string_view id, size_t max_len) {
  if (id.empty() || id.size() > max_len || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '_' || c == '-'; });
}

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

std::string get_string(const json& obj, const std::string& key, const std::string& path) {
  const auto& v = obj.at(key);
  if (!v.is_string()) throw Fail{path + ": expected a string, got " + v.dump()};
  return v.get<std::string>();
}

std::chrono::milliseconds get_duration(const json& obj, const std::string& key, const std::string& path, bool zero_ok) {
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

}  // namespace config_parts

namespace {

using namespace config_parts;

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
    for (const auto& opt : options()) {
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

}  // namespace mooring::nodeagent
