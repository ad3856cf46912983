// The supervision of CSI plugins that run as allocations' tasks (Nomad's dynamic plugins): each
// plugin task gets a PluginSupervisor in its "external socket" mode — the one fingerprinting path
// of configured and socket plugins — that brings it up (healthy within HealthTimeout, registered
// as owned by its allocation) and then heartbeats it. When the task stops, its instance leaves
// the registry at once (a dead socket is never where calls go), then one final fingerprint
// (unhealthy) runs and the instance is retired:
//  - replaced meanwhile by a newer instance of the plugin id (an upgrade step): only its own
//    fingerprint goes; the newer instance is left alone;
//  - it was the registered instance and an earlier instance of the plugin id still runs healthy
//    here — another allocation's (the newest first), else a configured plugin's — that one is
//    registered again and serves (the fallback); its own fingerprint goes;
//  - nothing else serves and no mount record on this node uses the plugin id: its fingerprint goes;
//  - otherwise its fingerprint stays listed unhealthy, "plugin allocation stopped; N volumes
//    waiting", until the last such volume is released or an instance of the plugin registers
//    (the waiting unmounts are woken by PluginManager's healthy_again when it is healthy).
// After an agent restart, a plugin task that still runs is supervised again by its allocation;
// the registry entry of one that stopped meanwhile is retired by the same rules. Of two running
// instances of one plugin id, the newer allocation's (CreateIndex) serves once healthy, in
// whatever order they were re-adopted.
//
// Not thread-safe: use from the agent's executor.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mooring/v1/types.pb.h"
#include "services/nodeagent/allocrunner/plugin_task_supervision.hpp"
#include "services/nodeagent/plugins/supervisor.hpp"
#include "shared/async/task_group.hpp"

namespace mooring::async {
class WakeSignal;
}

namespace mooring::nodeagent {

class NodeStatus;
class PluginRegistry;
struct PluginInstance;

// How many mount records on this node name the plugin id (volumes that still need it).
using VolumesUsingPlugin = std::function<std::size_t(const std::string& plugin_id)>;

// The supervisors of the configured plugins (config file, adopted sockets): fallbacks when the
// allocation instance that replaced one of them ends.
using ConfiguredSupervisors = std::function<std::vector<PluginSupervisor*>()>;

struct AllocationPluginsOptions {
  PluginClientFactory make_client;
  ConfiguredSupervisors configured;
  std::chrono::milliseconds probe_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds fingerprint_interval{std::chrono::seconds(30)};
};

class AllocationPlugins final : public PluginTaskSupervision {
 public:
  AllocationPlugins(boost::asio::any_io_executor ex, PluginRegistry& registry, NodeStatus& status,
                    VolumesUsingPlugin volumes_using, AllocationPluginsOptions options);
  ~AllocationPlugins() override;

  boost::asio::awaitable<domain::Status> supervise(const std::string& alloc_id, std::uint64_t create_index,
                                                   const domain::TaskCSIPlugin& plugin, const std::string& socket_path,
                                                   PluginTaskEvents events) override;
  void stopped(const std::string& alloc_id) override;

  // After a restart: a registered instance whose allocation no longer runs here is retired.
  void retire_orphan(const PluginInstance& instance);
  // Something that retiring instances wait on changed (a volume released, a plugin registered or
  // fingerprinted): run() re-checks them.
  void wake();
  // Re-checks the retiring instances whenever woken; runs until cancelled.
  boost::asio::awaitable<void> run();
  // One check now (tests).
  void reevaluate();

  // Agent shutdown: heartbeats stop and every supervised plugin is reported unhealthy ("agent
  // shutting down"); registry entries stay, the tasks keep running and are re-adopted.
  boost::asio::awaitable<void> shutdown();

  std::size_t supervised() const { return supervised_.size(); }
  // Allocation ids of the instances whose fingerprint is kept listed for waiting volumes.
  std::vector<std::string> retiring() const;
  PluginSupervisor* supervisor(const std::string& alloc_id);

 private:
  struct Supervised {
    std::unique_ptr<PluginSupervisor> supervisor;
    std::uint64_t create_index = 0;  // the allocation's: the newer of two instances serves
  };
  struct Retiring {
    std::string plugin_id;
    std::vector<PluginKind> kinds;
    std::uint64_t generation = 0;
    bool released = false;  // its registry entries are gone (release() ran)
    ::mooring::v1::PluginFingerprint fingerprint;
    std::size_t waiting = 0;  // as last reported
  };
  enum class Released { replaced, vacated };
  // Takes a stopped instance out of the registry: `replaced` when another instance serves in its
  // place (a newer one had already taken it, or an earlier healthy one serves again), else
  // `vacated`. Nothing tells the two ways of `replaced` apart: both leave nothing to retire.
  Released release(const std::string& alloc_id, const std::string& plugin_id, const std::vector<PluginKind>& kinds,
                   std::uint64_t generation);
  // After the final fingerprint: what stays listed of a stopped, released instance.
  void retire(const std::string& alloc_id, const PluginSupervisor& supervisor, Released released);
  // Some instance of the plugin id is registered for one of `kinds`.
  bool served(const std::string& plugin_id, const std::vector<PluginKind>& kinds) const;
  // The healthy, registered instance of `plugin_id` (serving `kind` when given) of the newest
  // allocation (CreateIndex, then the latest registration) other than `except_alloc`'s; null when none.
  PluginSupervisor* newest_allocation_instance(const std::string& plugin_id, std::optional<PluginKind> kind,
                                               const std::string& except_alloc) const;
  // The same, else a configured plugin's healthy instance serving `kind`; null when there is none.
  PluginSupervisor* newest_healthy(const std::string& plugin_id, PluginKind kind,
                                   const std::string& except_alloc = {}) const;
  // Registers again, for each of `kinds` left without an instance, the newest healthy instance
  // other than `except_alloc`'s; false when none.
  bool fall_back(const std::string& plugin_id, const std::vector<PluginKind>& kinds, const std::string& except_alloc);
  // After an adoption: the newest healthy instance serves (an agent restart re-adopts the copies
  // of an upgrade step in any order; the older one must not keep the registry).
  void prefer_newest(const std::string& plugin_id);

  boost::asio::any_io_executor ex_;
  PluginRegistry& registry_;
  NodeStatus& status_;
  VolumesUsingPlugin volumes_using_;
  AllocationPluginsOptions options_;
  std::unique_ptr<async::WakeSignal> wake_;
  std::map<std::string, std::shared_ptr<Supervised>> supervised_;  // by alloc id
  std::map<std::string, Retiring> retiring_;                       // by alloc id
  bool shut_down_ = false;
  async::TaskGroup tasks_;  // heartbeats and stop paths; last: destroyed (and cancelled) first
};

}  // namespace mooring::nodeagent
