// What the node agent's config files share (agent_config.cpp: layers and checks;
// plugin_config.cpp: plugins; agent_options.cpp: the settings' table). Private to the config room.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "services/nodeagent/config/agent_config.hpp"
#include "shared/config/settings.hpp"

namespace mooring::nodeagent::config_parts {

using json = nlohmann::json;

// A configuration error on its way to ConfigError.
struct Fail {
  std::string message;
};

// One row per setting: the flag, its environment variable, the key in the config file.
using Option = config::Doc;
const std::vector<Option>& options();
const Option* find_flag(std::string_view name);

bool is_valid_id(std::string_view id, size_t max_len);
inline std::string qt(std::string_view s) { return json(std::string(s)).dump(); }
std::vector<std::string> split(std::string_view s, char sep);
std::string get_string(const json& obj, const std::string& key, const std::string& path);
// `zero_ok`: 0 is a meaningful value (drain_on_shutdown 0 = do not drain), not a mistake.
std::chrono::milliseconds get_duration(const json& obj, const std::string& key, const std::string& path,
                                       bool zero_ok = false);

// The --plugin short form, turned into the same JSON object the config file uses.
json plugin_spec_to_json(std::string_view spec, std::string_view origin);
// A `plugins` list, each entry checked, an id naming one entry or a controller and node pair.
std::vector<PluginConfig> decode_plugin_list(const json& list, const std::string& path);
// Adds `incoming` plugins to `out`; the entries of an id already present are replaced by the
// incoming ones of that id (the later source wins, as for every other setting, and a split
// plugin's pair is replaced as one).
void merge_plugins(std::vector<PluginConfig>& out, const std::vector<PluginConfig>& incoming);

}  // namespace mooring::nodeagent::config_parts
