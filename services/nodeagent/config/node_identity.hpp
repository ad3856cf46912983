// The node's stable identity: generated once (a UUID v4, domain::new_id) and kept in
// <data-dir>/node-id, so the agent keeps its node id across restarts and the control plane
// recognises it.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace mooring::nodeagent {

// Returns the persisted node id, creating and persisting a new one when there is none.
std::string load_or_create_node_id(const std::filesystem::path& data_dir, std::error_code& ec);

}  // namespace mooring::nodeagent
