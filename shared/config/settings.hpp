// What the services' configuration parsers share: the flag splitter, the JSON config file reader
// and the --help renderer. Each service keeps its own table of settings and its own decoding;
// the layering (file, then environment, then flags) is theirs too. Pure apart from reading the file.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mooring::config {

// Thrown by the functions below; `message` names the flag or file and the reason.
struct Error {
  std::string message;
};

// One setting as --help shows it.
struct Doc {
  std::string_view flag;        // without "--"
  std::string_view env;         // environment variable
  std::string_view key;         // config file key; empty: not in the file
  std::string_view value_name;  // FILE, DURATION, ...
  std::string_view help;
  std::string_view default_value;  // empty: none shown
};

// The process environment's variables whose names start with `prefix` (e.g. "MOORING_").
std::map<std::string, std::string> environment(std::string_view prefix);

// A boolean setting as flags, the environment and config files spell it: true/false, 1/0, on/off,
// yes/no (any case). nullopt for anything else; kBoolSpellings names them for the error.
std::optional<bool> parse_bool(std::string_view text);
inline constexpr std::string_view kBoolSpellings = "true or false (1/0, on/off, yes/no)";

// A config file's value of a boolean setting: a JSON boolean or a string parse_bool() accepts.
// Throws an Error "<where>: expected true or false (...), got <value>" otherwise.
bool json_bool(const nlohmann::json& value, const std::string& where);

// "-h" or "--help" anywhere: the user is asking how to fix the command line, even a bad one.
bool wants_help(const std::vector<std::string>& argv);
// "--help-markdown" anywhere: print the reference page (markdown_page) instead of running.
bool wants_markdown(const std::vector<std::string>& argv);

struct Flag {
  std::string name;  // without "--"
  std::string value;
};
// argv[0] is skipped. "--name value" and "--name=value"; a word that is not a flag, or a flag
// without a value, is an Error. Names are not checked here. A name in `switches` takes no value
// ("--insecure" is "true"), unless written "--insecure=false".
std::vector<Flag> split_flags(const std::vector<std::string>& argv, const std::set<std::string>& switches = {});

// The file's JSON object; an Error names the file when it cannot be read, is not JSON or is not
// an object.
nlohmann::json read_file(const std::string& path);

// "<intro>\n" then every setting: flag, value, help, env, file key and default.
std::string help_text(std::string_view intro, const std::vector<Doc>& docs);

// A binary's reference page (docs/configuration/*.md), printed by the binary itself so the page
// cannot drift from its flag table: a generated-by note, the title, `intro` (markdown) and one
// table row per setting. The file key column is left out when no setting has one.
struct Page {
  std::string_view title;         // "mooring-controlplane"
  std::string_view generated_by;  // the command that prints it: "mooring-controlplane --help-markdown"
  std::string_view intro;
  std::string_view flag_prefix = "--";  // "-" for the CLI's Go-style flags
};
std::string markdown_page(const Page& page, const std::vector<Doc>& docs);

}  // namespace mooring::config
