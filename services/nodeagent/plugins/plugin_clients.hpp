// One shared CSI client per plugin socket on this node, used by the volume manager's node calls,
// the forwarded controller calls and NodeExpandVolume: one channel per socket instead of one per
// caller. A client reconnects on its own when a restarted plugin re-creates its socket.
//
// Not thread-safe: use from the agent's executor.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <map>
#include <memory>
#include <string>

namespace mooring::rpc {
class CsiClient;
}

namespace mooring::nodeagent {

class PluginClients {
 public:
  explicit PluginClients(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}
  ~PluginClients();

  std::shared_ptr<rpc::CsiClient> get(const std::string& socket_path);
  // Closes every client: calls in flight fail at once (agent shutdown never waits on a plugin).
  void close_all();

 private:
  boost::asio::any_io_executor ex_;
  std::map<std::string, std::shared_ptr<rpc::CsiClient>> clients_;
};

}  // namespace mooring::nodeagent
