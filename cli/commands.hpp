// CLI room: the command table. Each family lives in its own file and returns its specs;
// run.cpp dispatches on them.
#pragma once

#include <vector>

#include "cli/args.hpp"

namespace mooring::cli {

std::vector<CommandSpec> volume_commands();      // status, register, create, init, delete, deregister, detach, expand
CommandSpec volume_init_command();               // volume init: an example spec file (volume_init.cpp)
std::vector<CommandSpec> snapshot_commands();    // volume snapshot create|list|delete
std::vector<CommandSpec> claim_commands();       // volume claim list|delete (claim_commands.cpp)
std::vector<CommandSpec> plugin_commands();      // plugin status
std::vector<CommandSpec> node_commands();        // node status
std::vector<CommandSpec> node_drain_commands();  // node eligibility|drain (node_drain_commands.cpp)
std::vector<CommandSpec> alloc_commands();       // alloc run|stop|status
std::vector<CommandSpec> event_commands();       // events
std::vector<CommandSpec> tls_commands();         // tls ca create, tls cert create (local files, no API call)
std::vector<CommandSpec> operator_commands();    // operator keyring rotate
std::vector<CommandSpec> acl_commands();         // acl bootstrap, acl policy ..., acl token ...
std::vector<CommandSpec> namespace_commands();   // namespace list|status|apply|delete

// Every command, in the order the top-level usage lists them.
const std::vector<CommandSpec>& all_commands();

}  // namespace mooring::cli
