// CLI room: the global flags and the environment variables behind them, in one table that the
// parser, the usage text, main.cpp (which variables to read) and the reference page
// docs/configuration/cli.md (`mooring --help-markdown`) all read, so none of them can drift.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "shared/config/settings.hpp"

namespace mooring::cli {

struct GlobalSetting {
  config::Doc doc;                    // flag without the dash, env, value name ("" for a switch), help, default
  std::string GlobalOptions::*field;  // where a value goes; nullptr for the -json switch
};

const std::vector<GlobalSetting>& global_settings();

// The setting of flag `name` ("address"), nullptr when it is not a global flag.
const GlobalSetting* find_global(const std::string& name);

// Fills what the command line left empty from the environment (`env`: variable -> value).
void apply_environment(GlobalOptions& globals, const std::map<std::string, std::string>& env);

// The variables main.cpp passes on: every setting's env.
std::vector<std::string> environment_names();

// "Global flags:" and one entry per setting, wrapped, for the usage texts.
std::string global_flags_usage();

// docs/configuration/cli.md.
std::string cli_reference_markdown();

}  // namespace mooring::cli
