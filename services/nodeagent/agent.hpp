// The node agent as one object: plugin supervisors, the plugin registry, the node status and the
// control plane link, started together and shut down in the order seed 003 asks for. main.cpp
// and the integration tests drive this same class.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>
#include <vector>

#include "services/nodeagent/config/agent_config.hpp"
#include "services/nodeagent/plugins/supervisor.hpp"

namespace mooring::async {
class TaskGroup;
}

namespace mooring::nodeagent {

class ControlPlaneLink;
class NodeStatus;
class PluginRegistry;

struct AgentOptions {
  // Tests shorten these; production uses the defaults.
  async::Backoff restart_backoff{std::chrono::seconds(1), std::chrono::seconds(60), 2.0, 0.2};
  std::chrono::milliseconds final_heartbeat_timeout{std::chrono::seconds(5)};
  PluginClientFactory make_client;  // empty: gRPC over the plugin's unix socket
};

class Agent {
 public:
  // `config.node_id` must be resolved (see load_or_create_node_id).
  Agent(boost::asio::any_io_executor ex, AgentConfig config, AgentOptions options = {});
  ~Agent();

  // Loads the registry, reconciles plugins left by a previous run, starts every supervisor and
  // the control plane link. Returns at once; everything runs in the agent's task groups.
  void start();

  // Graceful shutdown: stop the loops, one last fingerprint with a closed client marks every
  // plugin unhealthy, a final heartbeat reports it, launched plugins are stopped (SIGTERM, then
  // SIGKILL), plugins that are gone are deregistered. Bounded in time by the stop timeouts.
  boost::asio::awaitable<void> shutdown();

  NodeStatus& status() { return *status_; }
  PluginRegistry& registry() { return *registry_; }
  ControlPlaneLink& link() { return *link_; }
  PluginSupervisor* supervisor(const std::string& plugin_id);
  const AgentConfig& config() const { return config_; }

 private:
  void reconcile_persisted_plugins();

  boost::asio::any_io_executor ex_;
  AgentConfig config_;
  AgentOptions options_;
  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<NodeStatus> status_;
  std::unique_ptr<ControlPlaneLink> link_;
  std::vector<std::unique_ptr<PluginSupervisor>> supervisors_;
  bool started_ = false;
  bool shut_down_ = false;
  // Task groups last: destroyed first, so nothing they run outlives the members above.
  std::unique_ptr<async::TaskGroup> processes_;  // launched plugins' process pumps
  std::unique_ptr<async::TaskGroup> loops_;      // supervisors and the control plane link
};

}  // namespace mooring::nodeagent
