// The one owner of this node's CSI plugin clients (Nomad's csimanager): one channel per plugin
// socket shared by every caller, the one answer to "which instance of plugin X is healthy here"
// (registered, and its latest fingerprint healthy), and the "healthy again" signal that
// early-wakes the volume manager's retrying unmounts.
//
// Not thread-safe: use from the agent's executor.
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "services/nodeagent/plugins/limits_watch.hpp"
#include "services/nodeagent/plugins/plugin_client.hpp"
#include "services/nodeagent/volumes/node_plugins.hpp"

namespace mooring::nodeagent {

class NodeStatus;
class PluginRegistry;
enum class PluginKind;

class PluginManager final : public NodePluginLookup {
 public:
  PluginManager(boost::asio::any_io_executor ex, PluginRegistry& registry, NodeStatus& status);
  ~PluginManager() override;

  // The supervisor's client for the plugin at `socket_path`. It shares the socket's channel, and
  // closing it fails only its own calls: the final fingerprint at shutdown reports unhealthy.
  std::unique_ptr<PluginClient> supervisor_client(const std::string& plugin_id, const std::string& socket_path);

  // The client of the `kind` instance of `plugin_id` that is healthy here; nullptr otherwise.
  std::shared_ptr<rpc::CsiClient> healthy_client(PluginKind kind, const std::string& plugin_id);

  // The volume manager's view: the healthy node (or monolith) instance, and its wake signal.
  std::optional<NodePlugin> find(const std::string& plugin_id) override;
  async::WakeSignal& healthy_again(const std::string& plugin_id) override;

  // A RESOURCE_EXHAUSTED answer from the plugin (empty: from some plugin): its supervisor
  // fingerprints it now, so the node's max volumes reach the control plane fresh.
  void limits_exhausted(const std::string& plugin_id) override { limits_.exhausted(plugin_id); }
  LimitsWatch& limits() { return limits_; }

  // Call on every node status change: a node plugin that became healthy, or changed its socket
  // or capabilities, wakes the unmounts waiting for it.
  void status_changed();

  // Closes every channel: calls in flight fail at once (shutdown never waits on a plugin).
  void close_all();

 private:
  struct Healthy {
    std::string socket;
    bool requires_stage = false;
    bool supports_expand = false;
    bool supports_stats = false;
    bool supports_condition = false;
    bool supports_mount_group = false;
    bool operator==(const Healthy&) const = default;
  };
  std::optional<Healthy> healthy(PluginKind kind, const std::string& plugin_id) const;
  // The socket's client; `plugin_id` names its calls in mooring_csi_rpc_seconds.
  std::shared_ptr<rpc::CsiClient> channel(const std::string& socket_path, const std::string& plugin_id);

  boost::asio::any_io_executor ex_;
  PluginRegistry& registry_;
  NodeStatus& status_;
  LimitsWatch limits_;
  std::map<std::string, std::shared_ptr<rpc::CsiClient>> channels_;  // by socket path
  std::map<std::string, Healthy> healthy_nodes_;                     // as of the last status change
  std::map<std::string, std::unique_ptr<async::WakeSignal>> signals_;
};

}  // namespace mooring::nodeagent
