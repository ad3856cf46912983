#include "cli/commands.hpp"

#include "cli/completion.hpp"

namespace mooring::cli {

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> commands = [] {
    std::vector<CommandSpec> all;
    for (auto family : {volume_commands, snapshot_commands, claim_commands, plugin_commands, node_commands,
                        node_drain_commands, alloc_commands, event_commands, tls_commands, operator_commands,
                        acl_commands, namespace_commands, completion_commands})
      for (auto& c : family()) all.push_back(std::move(c));
    return all;
  }();
  return commands;
}

}  // namespace mooring::cli
