// CLI room: shell completion scripts generated from the command table itself (words, flags,
// fixed argument values, summaries) and the global flags, so a command added to the table
// completes without anyone editing a script.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/args.hpp"

namespace mooring::cli {

// The script for "bash" or "zsh"; "" for another shell.
std::string completion_script(std::string_view shell, const std::vector<CommandSpec>& commands);

std::vector<CommandSpec> completion_commands();  // completion bash|zsh

}  // namespace mooring::cli
