#include "services/nodeagent/config/agent_config_parts.hpp"

#include <map>
#include <set>

namespace mooring::nodeagent {
namespace config_parts {
namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace config_parts

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

bool is_valid_plugin_id(std::string_view id) { return config_parts::is_valid_id(id, 64); }

}  // namespace mooring::nodeagent
