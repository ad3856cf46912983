#include "shared/config/settings.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mooring::config {

namespace {
std::string json_quoted(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }
}  // namespace

std::map<std::string, std::string> environment(std::string_view prefix) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    if (const auto eq = kv.find('='); eq != std::string_view::npos && kv.starts_with(prefix))
      env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::optional<bool> parse_bool(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (t == "true" || t == "1" || t == "on" || t == "yes") return true;
  if (t == "false" || t == "0" || t == "off" || t == "no") return false;
  return std::nullopt;
}

bool json_bool(const nlohmann::json& value, const std::string& where) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_string())
    if (const auto b = parse_bool(value.get<std::string>())) return *b;
  throw Error{where + ": expected " + std::string(kBoolSpellings) + ", got " + value.dump()};
}

bool wants_help(const std::vector<std::string>& argv) {
  for (std::size_t i = 1; i < argv.size(); ++i)
    if (argv[i] == "-h" || argv[i] == "--help") return true;
  return false;
}

std::vector<Flag> split_flags(const std::vector<std::string>& argv, const std::set<std::string>& switches) {
  std::vector<Flag> out;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (!arg.starts_with("--")) throw Error{"unexpected argument " + json_quoted(arg) + " (see --help)"};
    Flag f{arg.substr(2), {}};
    if (const auto eq = f.name.find('='); eq != std::string::npos) {
      f.value = f.name.substr(eq + 1);
      f.name.resize(eq);
    } else if (switches.contains(f.name)) {
      f.value = "true";
    } else {
      if (i + 1 >= argv.size()) throw Error{"flag --" + f.name + " needs a value"};
      f.value = argv[++i];
    }
    out.push_back(std::move(f));
  }
  return out;
}

nlohmann::json read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error{"config file " + json_quoted(path) + ": cannot be read"};
  nlohmann::json file;
  try {
    file = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error{"config file " + json_quoted(path) + ": invalid JSON: " + e.what()};
  }
  if (!file.is_object()) throw Error{"config file " + json_quoted(path) + ": expected a JSON object"};
  return file;
}

std::string help_text(std::string_view intro, const std::vector<Doc>& docs) {
  std::ostringstream out;
  out << intro << "\n";
  for (const auto& d : docs) {
    out << "  --" << d.flag << (d.value_name.empty() ? "" : " ") << d.value_name << "\n      " << d.help
        << "\n      env " << d.env;
    if (!d.key.empty()) out << ", file key \"" << d.key << "\"";
    if (!d.default_value.empty()) out << ", default " << d.default_value;
    out << "\n";
  }
  out << "  -h, --help\n      this text\n";
  return out.str();
}

}  // namespace mooring::config
