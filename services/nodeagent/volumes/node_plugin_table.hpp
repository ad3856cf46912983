// The node plugins the volume manager may call, kept by whoever supervises them: the agent sets a
// plugin healthy (with its client and whether it stages) when the fingerprinter says so and
// unhealthy when it stops; setting it healthy wakes every unmount waiting for that plugin.
//
// Not thread-safe: use from the executor the wake signals were made with.
#pragma once

#include "services/nodeagent/volumes/node_plugins.hpp"
#include "shared/async/wake_signal.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <map>
#include <memory>
#include <string>

namespace mooring::nodeagent {

class NodePluginTable final : public NodePluginLookup {
 public:
  explicit NodePluginTable(boost::asio::any_io_executor executor);

  // `plugin` is now the running instance of `plugin_id`; wakes waiters for it.
  void set_healthy(const std::string& plugin_id, NodePlugin plugin);
  // The plugin stopped or failed its probe: find() answers nullopt until set_healthy again.
  void set_unhealthy(const std::string& plugin_id);

  std::optional<NodePlugin> find(const std::string& plugin_id) override;
  async::WakeSignal& healthy_again(const std::string& plugin_id) override;

 private:
  boost::asio::any_io_executor executor_;
  std::map<std::string, NodePlugin> running_;
  std::map<std::string, std::unique_ptr<async::WakeSignal>> signals_;
};

}  // namespace mooring::nodeagent
