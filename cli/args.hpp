// CLI room: the command table and the pure argument parser. Go-style flags (`-json`,
// `-address=X`, `-address X`; `--json` works too) may appear before the command words or
// anywhere after them; `--` ends the flags. No I/O here, so it is unit-tested directly.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mooring::cli {

class Context;

struct FlagSpec {
  std::string name;          // without the dash: "force", "plugin"
  bool takes_value = false;  // false: a boolean switch ("-force", "-force=false" also accepted)
  std::string value_name;    // for usage: "ID", "DURATION"
  std::string help;
  bool repeatable = false;  // given more than once: the values joined with ','
};

struct Invocation;

struct CommandSpec {
  std::vector<std::string> words;  // {"volume", "snapshot", "create"}
  std::string arguments;           // usage after the words: "VOLUME NAME"
  std::size_t min_args = 0;
  std::size_t max_args = 0;
  std::vector<FlagSpec> flags;  // the command's own flags (global flags are always accepted)
  std::string summary;          // one line, for the command list
  std::string help;             // longer text for `-h`
  std::function<int(Context&, const Invocation&)> run;
  std::vector<std::string> choices;  // the values the arguments take, when fixed: shell completion offers them
};

struct GlobalOptions {
  std::string address;  // "" = not given on the command line
  bool json = false;
  std::string secrets;  // raw "k=v,k2=v2"
  // HTTPS ("" = not given on the command line; the environment may give them).
  std::string ca_cert;
  std::string client_cert;
  std::string client_key;
  std::string token;  // ACL SecretID ("" = not given; MOORING_TOKEN may give it)
  std::string ns;     // -namespace ("" = not given; MOORING_NAMESPACE may give it; else the API's "default")
};

struct Invocation {
  GlobalOptions globals;
  const CommandSpec* command = nullptr;
  std::vector<std::string> args;             // positionals after the command words
  std::map<std::string, std::string> flags;  // the command's flags: name -> value ("true" for switches)

  bool has(const std::string& flag) const { return flags.contains(flag); }
  // A switch given as -flag or -flag=true.
  bool enabled(const std::string& flag) const { return flag_value_is_true(flag); }
  std::optional<std::string> flag(const std::string& name) const;

 private:
  bool flag_value_is_true(const std::string& name) const {
    auto it = flags.find(name);
    return it != flags.end() && it->second == "true";
  }
};

// What the command line asked for. Exactly one of: a command to run, help to print, an error.
struct ParseResult {
  Invocation invocation;
  bool help = false;                    // -h/-help/--help: print usage for `help_words`
  std::vector<std::string> help_words;  // the command words given so far (a group or a command)
  std::string error;                    // usage error; `help_words` says whose usage to show
};

// argv without argv[0].
ParseResult parse_command_line(const std::vector<std::string>& argv, const std::vector<CommandSpec>& commands);

// "k=v,k2=v2" -> map. Values may contain '='; a piece without '=' or with an empty key is an error.
bool parse_secrets(const std::string& text, std::map<std::string, std::string>& out, std::string& error);

// Usage texts. `words` empty: the top-level usage with every command; a group ("volume"): its
// subcommands; a command: its arguments, flags and help.
std::string usage_for(const std::vector<std::string>& words, const std::vector<CommandSpec>& commands);

}  // namespace mooring::cli
