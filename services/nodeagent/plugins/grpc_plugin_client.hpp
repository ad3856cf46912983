// PluginClient over gRPC to a CSI plugin's unix socket. Every call has the timeout of the CSI
// error table; a closed client fails every call at once (the final fingerprint at shutdown).
#pragma once

#include <memory>
#include <string>

#include "services/nodeagent/plugins/plugin_client.hpp"

namespace mooring::nodeagent {

std::unique_ptr<PluginClient> make_grpc_plugin_client(const std::string& socket_path);

}  // namespace mooring::nodeagent
