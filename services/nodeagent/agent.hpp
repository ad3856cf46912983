// The node agent as one object: plugin supervisors, the plugin registry, the node status and the
// control plane link, the volume manager, the allocations (watch loop, runners, status reports)
// and the NodeAgent gRPC service, started together and shut down in the order seeds 003 and 004
// ask for. main.cpp and the integration tests drive this same class.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "services/nodeagent/config/agent_config.hpp"
#include "services/nodeagent/plugins/supervisor.hpp"

namespace mooring::async {
class TaskGroup;
class WakeSignal;
}  // namespace mooring::async
namespace mooring::rpc {
class Server;
}
namespace grpc {
class Service;
}

namespace mooring::rpc {
class TransportSecurity;
}

namespace mooring::nodeagent {

class AllocManager;
class CertificateRenewal;
class LeaderFence;
class OperationCache;
class ControlPlaneCalls;
class ControlPlaneTarget;
class ControlPlaneLink;
class NodeStatus;
class PluginManager;
class PluginRegistry;
class ProcMountTable;
class StatusReporter;
class AllocationPlugins;
class VolumeManager;
class VolumeManagerMounter;

struct AgentOptions {
  // Tests shorten these; production uses the defaults.
  async::Backoff restart_backoff{std::chrono::seconds(1), std::chrono::seconds(60), 2.0, 0.2};
  std::chrono::milliseconds final_heartbeat_timeout{std::chrono::seconds(5)};
  PluginClientFactory make_client;                                 // empty: gRPC over the plugin's unix socket
  std::chrono::milliseconds watch_wait{std::chrono::seconds(30)};  // allocation long poll
  std::chrono::milliseconds disconnect_check_interval{std::chrono::seconds(1)};
  // Unmount / control plane notification retries of the volume manager.
  async::Backoff release_backoff{std::chrono::milliseconds(250), std::chrono::seconds(30), 2.0, 0.2};
  std::chrono::milliseconds claim_backoff_initial{std::chrono::seconds(1)};
  std::chrono::milliseconds claim_backoff_max{std::chrono::seconds(60)};
  // Bounds of the shutdown steps that talk to others; shutdown never waits on a plugin.
  std::chrono::milliseconds shutdown_grace{std::chrono::seconds(2)};
  // What in-flight calls of the control plane get when the agent's gRPC service stops; they may be
  // waiting on a plugin, and the control plane retries them (they are idempotent).
  std::chrono::milliseconds server_grace{std::chrono::milliseconds(50)};
  // Mutual TLS with the control plane, both directions; null: plaintext.
  std::shared_ptr<const rpc::TransportSecurity> security;
};

class Agent {
 public:
  // The grpc.health.v1 service name that answers readiness (see update_readiness).
  static constexpr std::string_view kReadinessService = "mooring.ready";

  // `config.node_id` must be resolved (see load_or_create_node_id).
  Agent(boost::asio::any_io_executor ex, AgentConfig config, AgentOptions options = {});
  ~Agent();

  // Loads the registry, reconciles plugins left by a previous run, starts every supervisor and
  // the control plane link. Returns at once; everything runs in the agent's task groups.
  // Returns an error, having started nothing, when the NodeAgent gRPC service cannot listen (its
  // address taken): an agent the control plane cannot call must not run plugins and tasks.
  std::string start();

  // Graceful shutdown. With config.drain_on_shutdown > 0, every allocation is stopped first and
  // their volume releases get that long to finish. Then: stop the loops, one last fingerprint with a closed client marks every
  // plugin unhealthy, a final heartbeat reports it, launched plugins are stopped (SIGTERM, then
  // SIGKILL), plugins that are gone are deregistered. Bounded in time by the stop timeouts.
  boost::asio::awaitable<void> shutdown();

  NodeStatus& status() { return *status_; }
  PluginRegistry& registry() { return *registry_; }
  ControlPlaneLink& link() { return *link_; }
  // The supervisor of the plugin's entry (of `role`, for a split plugin's controller or node).
  PluginSupervisor* supervisor(const std::string& plugin_id, std::optional<PluginRole> role = std::nullopt);
  const AgentConfig& config() const { return config_; }
  VolumeManager& volumes() { return *volumes_; }
  AllocManager& allocations() { return *allocs_; }
  StatusReporter& status_reporter() { return *reporter_; }
  AllocationPlugins& allocation_plugins() { return *allocation_plugins_; }
  // The bound NodeAgent gRPC port (0 when the server did not start or listens on a unix socket).
  int grpc_port() const;
  // How long the control plane has not been reached.
  std::chrono::steady_clock::duration disconnected_for() const;

 private:
  // The constructor's wiring, by concern.
  void wire_volumes(const std::filesystem::path& data_dir);
  void wire_allocations(const std::filesystem::path& data_dir);
  void wire_link();
  void spawn_volume_stats();
  void reconcile_persisted_plugins();
  std::string start_grpc_server();
  void release_orphaned_mounts();
  boost::asio::awaitable<bool> drain(std::chrono::milliseconds limit);
  void update_readiness();
  // Every call to the control plane reports whether it was answered (see agent.cpp).
  void controlplane_contact(bool answered);

  boost::asio::any_io_executor ex_;
  AgentConfig config_;
  AgentOptions options_;
  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<NodeStatus> status_;
  std::unique_ptr<ControlPlaneLink> link_;
  std::vector<std::unique_ptr<PluginSupervisor>> supervisors_;
  std::chrono::steady_clock::time_point last_contact_;
  bool controlplane_failed_ = false;  // a call failed since the last answer
  bool contacted_ = false;
  std::unique_ptr<async::WakeSignal> controlplane_back_;
  std::unique_ptr<async::WakeSignal> stats_now_;  // a volume was mounted: poll the fresh mounts' stats soon
  std::unique_ptr<PluginManager> plugins_;
  std::unique_ptr<async::WakeSignal> released_;            // a volume release finished
  std::unique_ptr<AllocationPlugins> allocation_plugins_;  // plugins that run as allocations' tasks
  std::unique_ptr<ProcMountTable> mount_table_;
  std::unique_ptr<ControlPlaneCalls> controlplane_;
  std::shared_ptr<ControlPlaneTarget> controlplane_target_;  // shared by controlplane_ and link_
  std::unique_ptr<VolumeManager> volumes_;
  std::unique_ptr<VolumeManagerMounter> mounter_;
  std::unique_ptr<StatusReporter> reporter_;
  std::unique_ptr<AllocManager> allocs_;
  std::unique_ptr<OperationCache> operations_;   // controller calls with an operation id, run once
  std::unique_ptr<LeaderFence> fence_;           // refuses calls from a control plane that no longer leads
  std::unique_ptr<CertificateRenewal> renewal_;  // mutual TLS: renews the agent's certificate
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<rpc::Server> server_;
  bool started_ = false;
  bool shut_down_ = false;
  // Task groups last: destroyed first, so nothing they run outlives the members above.
  std::unique_ptr<async::TaskGroup> processes_;  // launched plugins' process pumps
  std::unique_ptr<async::TaskGroup> loops_;      // supervisors and the control plane link
};

}  // namespace mooring::nodeagent
