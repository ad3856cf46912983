// PluginClient over the shared typed CSI client (shared/rpc/csi_client.hpp): the per-RPC
// deadlines of the CSI error table, reconnection to a re-created socket, and a closed client that
// fails every call at once (the final fingerprint at shutdown).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <string>

#include "services/nodeagent/plugins/plugin_client.hpp"

namespace mooring::rpc {
class CsiClient;
}

namespace mooring::nodeagent {

std::unique_ptr<PluginClient> make_grpc_plugin_client(boost::asio::any_io_executor ex, const std::string& socket_path);
// The same over an existing client (shared with other users of the plugin's socket).
std::unique_ptr<PluginClient> make_plugin_client(std::shared_ptr<rpc::CsiClient> client);

}  // namespace mooring::nodeagent
