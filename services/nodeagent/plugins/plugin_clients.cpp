#include "services/nodeagent/plugins/plugin_clients.hpp"

#include "shared/rpc/csi_client.hpp"

namespace mooring::nodeagent {

PluginClients::~PluginClients() = default;

std::shared_ptr<rpc::CsiClient> PluginClients::get(const std::string& socket_path) {
  auto& c = clients_[socket_path];
  if (!c || c->closed()) c = std::make_shared<rpc::CsiClient>(ex_, socket_path);
  return c;
}

void PluginClients::close_all() {
  for (auto& [_, c] : clients_) c->close();
}

}  // namespace mooring::nodeagent
