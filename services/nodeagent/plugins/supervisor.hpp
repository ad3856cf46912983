// Supervision of one configured CSI plugin: one co_await loop that launches the plugin with
// CSI_ENDPOINT (or adopts an external socket), waits for its socket, probes it until healthy
// within health_timeout, registers it (provider and version from GetPluginInfo), then probes it
// every probe_interval and fingerprints it every fingerprint_interval and on every health change,
// emitting a node event on each change. A crashed or persistently unhealthy launched plugin is
// restarted with backoff; an observed exit is reported at once, not at the next probe.
// A plugin that runs as an allocation's task (Task.CSIPlugin) is supervised by the same class in
// its "external socket" mode, driven step by step by its allocation: adopt() once, then
// heartbeat() until the task stops (plugins/allocation_plugins.hpp).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "services/nodeagent/config/agent_config.hpp"
#include "services/nodeagent/plugins/fingerprint.hpp"
#include "services/nodeagent/plugins/limits_watch.hpp"
#include "services/nodeagent/plugins/plugin_client.hpp"
#include "shared/async/backoff.hpp"

namespace mooring::async {
class TaskGroup;
class WakeSignal;
}  // namespace mooring::async

namespace mooring::nodeagent {

class ChildProcess;
class NodeStatus;
class PluginRegistry;
enum class PluginKind;

// Creates a client for the plugin `plugin_id` listening on the unix socket at `socket_path`.
using PluginClientFactory =
    std::function<std::unique_ptr<PluginClient>(const std::string& plugin_id, const std::string& socket_path)>;

struct SupervisorContext {
  PluginRegistry& registry;
  NodeStatus& status;
  async::TaskGroup& processes;  // runs each launched process's run(); joined after shutdown()
  PluginClientFactory make_client;
  std::filesystem::path data_dir;
  async::Backoff restart_backoff{std::chrono::seconds(1), std::chrono::seconds(60), 2.0, 0.2};
  // A plugin task: the allocation that runs it owns its registry entry and fingerprint (both
  // carry this id), and every health change after its registration is also a task event.
  std::string alloc_id;
  std::function<void(std::string type, std::string message)> task_event;
  // Where RESOURCE_EXHAUSTED answers ask for a fingerprint now (limits_watch.hpp); null: none.
  LimitsWatch* limits = nullptr;
};

class PluginSupervisor {
 public:
  PluginSupervisor(boost::asio::any_io_executor ex, PluginConfig config, SupervisorContext ctx);
  ~PluginSupervisor();

  // The supervision loop; returns when the awaiting coroutine is cancelled. Spawn it in a task
  // group; cancel and join that group before shutdown().
  boost::asio::awaitable<void> run();

  // Graceful end (seed 003): one last fingerprint with a closed client marks the plugin unhealthy
  // in the node status (the final heartbeat reports it). Then stop_and_deregister().
  boost::asio::awaitable<void> final_fingerprint(std::string reason);
  // Stops a launched plugin (SIGTERM, SIGKILL after stop_timeout) and removes the instance from
  // the registry: a plugin that is gone is deregistered, not left "unhealthy" forever.
  boost::asio::awaitable<void> stop_and_deregister();

  // A plugin run by someone else (an allocation's task): one attempt to bring it up — wait for
  // its socket, probe until ready within health_timeout, one full fingerprint, then register and
  // report it healthy in one step. nullopt once registered; else why not ("plugin did not become
  // healthy within 30s: <last probe answer>").
  boost::asio::awaitable<std::optional<std::string>> adopt();
  // The adopted instance's heartbeat (probes, fingerprints, events on every health change) until
  // stop_heartbeat() or cancellation. Restarts nothing: the instance's owner decides.
  boost::asio::awaitable<void> heartbeat();
  void stop_heartbeat();
  // An adopted instance that a newer one had replaced takes the registry back (the newer one
  // ended): registered again, with a new generation. False if it was never registered.
  bool register_again();

  uint64_t generation() const { return generation_; }  // 0: not registered
  std::vector<PluginKind> kinds() const;
  const ::mooring::v1::PluginFingerprint& last_fingerprint() const { return fingerprinter_.last(); }

  const PluginConfig& config() const { return config_; }
  const std::string& socket_path() const { return socket_path_; }
  std::optional<pid_t> pid() const;
  unsigned restarts() const { return restarts_; }

 private:
  enum class InstanceEnd { exited, unhealthy, failed_start };
  boost::asio::awaitable<bool> launch();
  std::filesystem::path launch_record() const;
  // Stops the process a killed agent left running (found by the launch record), if it still runs.
  boost::asio::awaitable<void> stop_leftover();
  // nullopt once Probe answered ready within health_timeout, else the last reason it was not.
  boost::asio::awaitable<std::optional<std::string>> wait_until_healthy();
  // GetPluginInfo and the registration; nullopt once registered, else why not.
  boost::asio::awaitable<std::optional<std::string>> register_instance();
  boost::asio::awaitable<InstanceEnd> monitor();
  boost::asio::awaitable<void> end_instance(const std::string& why);
  boost::asio::awaitable<std::optional<grpc::Status>> probe_once(std::chrono::milliseconds timeout, bool& ready);
  void report(const ::mooring::v1::PluginFingerprint& fp);
  void set_health(bool healthy, const std::string& reason);
  void event(std::string message, std::map<std::string, std::string> details = {});
  bool process_exited() const;
  std::string exit_reason() const;

  boost::asio::any_io_executor ex_;
  PluginConfig config_;
  SupervisorContext ctx_;
  std::string socket_path_;
  Fingerprinter fingerprinter_;
  std::unique_ptr<PluginClient> client_;
  std::shared_ptr<ChildProcess> process_;
  std::shared_ptr<async::WakeSignal> exit_wake_;
  std::shared_ptr<LimitsWatch::Watcher> limits_ = std::make_shared<LimitsWatch::Watcher>();
  std::optional<bool> reported_healthy_;
  bool heartbeat_stopped_ = false;
  uint64_t generation_ = 0;  // registry instance; 0 = not registered
  unsigned launches_ = 0;
  unsigned restarts_ = 0;
  std::string provider_, version_;
};

}  // namespace mooring::nodeagent
