#include "services/nodeagent/plugins/allocation_plugins.hpp"

#include <algorithm>

#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;

const log::Logger kLog{"allocation-plugins"};

PluginRole role_of(domain::PluginType type) {
  switch (type) {
    case domain::PluginType::controller: return PluginRole::controller;
    case domain::PluginType::node: return PluginRole::node;
    case domain::PluginType::monolith: return PluginRole::monolith;
  }
  return PluginRole::monolith;
}

std::string waiting_text(std::size_t n) {
  return "plugin allocation stopped; " + std::to_string(n) + (n == 1 ? " volume waiting" : " volumes waiting");
}

}  // namespace

AllocationPlugins::AllocationPlugins(asio::any_io_executor ex, PluginRegistry& registry, NodeStatus& status,
                                     VolumesUsingPlugin volumes_using, AllocationPluginsOptions options)
    : ex_(ex),
      registry_(registry),
      status_(status),
      volumes_using_(std::move(volumes_using)),
      options_(std::move(options)),
      wake_(std::make_unique<async::WakeSignal>(ex)),
      tasks_(ex, "allocation-plugins") {}

AllocationPlugins::~AllocationPlugins() { tasks_.cancel(); }

PluginSupervisor* AllocationPlugins::supervisor(const std::string& alloc_id) {
  auto it = supervised_.find(alloc_id);
  return it == supervised_.end() ? nullptr : it->second->supervisor.get();
}

std::vector<std::string> AllocationPlugins::retiring() const {
  std::vector<std::string> out;
  for (const auto& [alloc, _] : retiring_) out.push_back(alloc);
  return out;
}

asio::awaitable<domain::Status> AllocationPlugins::supervise(const std::string& alloc_id, std::uint64_t create_index,
                                                             const domain::TaskCSIPlugin& plugin,
                                                             const std::string& socket_path, PluginTaskEvents events) {
  if (shut_down_) co_return domain::error("the node agent is shutting down");
  PluginConfig pc;
  pc.id = plugin.id;
  pc.type = role_of(plugin.type);
  pc.socket = socket_path;  // adopted, never launched: the allocation runs the process
  pc.health_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(plugin.health_timeout);
  if (pc.health_timeout.count() <= 0) pc.health_timeout = std::chrono::seconds(30);
  pc.probe_interval = options_.probe_interval;
  pc.fingerprint_interval = options_.fingerprint_interval;
  SupervisorContext ctx{registry_, status_, tasks_, options_.make_client, {}, {}, alloc_id, std::move(events)};
  auto entry = std::make_shared<Supervised>();
  entry->supervisor = std::make_unique<PluginSupervisor>(ex_, pc, std::move(ctx));
  entry->create_index = create_index;
  // A retiring instance of this allocation (a restart found it stopped, then it ran again) is
  // superseded by this supervision.
  retiring_.erase(alloc_id);
  supervised_[alloc_id] = entry;
  kLog.info("supervising a plugin task", {{"alloc", alloc_id}, {"plugin", plugin.id}, {"socket", socket_path}});
  if (auto failed = co_await entry->supervisor->adopt()) co_return domain::error(*failed);
  if (!supervised_.contains(alloc_id) || supervised_[alloc_id] != entry) {
    // Stopped while it was being fingerprinted: registered after stopped() looked, so released now.
    const auto& sup = *entry->supervisor;
    if (sup.generation() != 0) release(alloc_id, plugin.id, sup.kinds(), sup.generation());
    co_return domain::Status{};
  }
  prefer_newest(plugin.id);
  tasks_.spawn("plugin-task-" + alloc_id,
               [entry]() -> asio::awaitable<void> { co_await entry->supervisor->heartbeat(); });
  co_return domain::Status{};
}

void AllocationPlugins::stopped(const std::string& alloc_id) {
  auto it = supervised_.find(alloc_id);
  if (it == supervised_.end()) {
    // Not supervised in this run (its task ended while the agent was down): what the registry
    // still holds of it is retired all the same.
    for (const auto& inst : registry_.list())
      if (inst.reg.alloc_id == alloc_id) retire_orphan(inst);
    reevaluate();
    return;
  }
  auto entry = it->second;
  supervised_.erase(it);
  entry->supervisor->stop_heartbeat();
  // Out of the registry before anything is awaited: from now on no call goes to its socket, and
  // an earlier instance that still runs serves them.
  const auto& sup = *entry->supervisor;
  const auto released = sup.generation() == 0 ? Released::replaced  // never registered: nothing to fall back from
                                              : release(alloc_id, sup.config().id, sup.kinds(), sup.generation());
  // The final fingerprint runs against a closed client (seed 003): reported unhealthy with
  // everything else it knew; then what stays listed of it is decided by the rules above.
  tasks_.spawn("plugin-task-stopped-" + alloc_id, [this, entry, alloc_id, released]() -> asio::awaitable<void> {
    co_await entry->supervisor->final_fingerprint("plugin allocation stopped");
    retire(alloc_id, *entry->supervisor, released);
  });
}

void AllocationPlugins::retire(const std::string& alloc_id, const PluginSupervisor& supervisor, Released released) {
  const auto& id = supervisor.config().id;
  if (released != Released::vacated) {
    status_.remove_fingerprint(id, alloc_id);
    return;
  }
  Retiring r;
  r.plugin_id = id;
  r.kinds = supervisor.kinds();
  r.generation = supervisor.generation();
  r.released = true;
  r.fingerprint = supervisor.last_fingerprint();
  retiring_[alloc_id] = std::move(r);
  reevaluate();
}

void AllocationPlugins::retire_orphan(const PluginInstance& instance) {
  const auto& alloc_id = instance.reg.alloc_id;
  if (alloc_id.empty() || supervised_.contains(alloc_id)) return;
  auto& r = retiring_[alloc_id];
  if (std::find(r.kinds.begin(), r.kinds.end(), instance.kind) == r.kinds.end()) r.kinds.push_back(instance.kind);
  r.plugin_id = instance.reg.plugin_id;
  r.generation = instance.generation;
  r.released = false;
  auto& fp = r.fingerprint;
  fp.set_plugin_id(instance.reg.plugin_id);
  fp.set_alloc_id(alloc_id);
  fp.set_provider(instance.reg.provider);
  fp.set_version(instance.reg.version);
  fp.set_type(r.kinds.size() > 1                          ? v1::PLUGIN_TYPE_MONOLITH
              : r.kinds.front() == PluginKind::controller ? v1::PLUGIN_TYPE_CONTROLLER
                                                          : v1::PLUGIN_TYPE_NODE);
  kLog.info("retiring the plugin instance of an allocation that stopped while the agent was down",
            {{"alloc", alloc_id}, {"plugin", instance.reg.plugin_id}});
  wake();
}

void AllocationPlugins::wake() { wake_->notify(); }

asio::awaitable<void> AllocationPlugins::run() {
  auto seen = wake_->generation();
  reevaluate();
  while (true) {
    // Also now and then unasked: a record removed by a path that does not wake us is noticed.
    const auto slept = co_await async::sleep_for(std::chrono::seconds(5), wake_.get(), seen);
    if (slept == async::SleepEnd::cancelled) co_return;
    seen = wake_->generation();
    reevaluate();
  }
}

AllocationPlugins::Released AllocationPlugins::release(const std::string& alloc_id, const std::string& plugin_id,
                                                       const std::vector<PluginKind>& kinds, std::uint64_t generation) {
  bool serving = false;
  for (const auto kind : kinds) serving = registry_.deregister(kind, plugin_id, generation) || serving;
  if (!serving) {
    kLog.info("stopped plugin instance replaced by a newer one", {{"alloc", alloc_id}, {"plugin", plugin_id}});
    return Released::replaced;
  }
  if (fall_back(plugin_id, kinds, alloc_id)) {
    status_.add_event(
        "plugin",
        "plugin instance of a stopped allocation deregistered; the earlier instance still running serves again",
        {{"plugin_id", plugin_id}, {"alloc_id", alloc_id}});
    return Released::replaced;
  }
  return Released::vacated;
}

bool AllocationPlugins::served(const std::string& plugin_id, const std::vector<PluginKind>& kinds) const {
  return std::any_of(kinds.begin(), kinds.end(),
                     [&](PluginKind k) { return registry_.lookup(k, plugin_id).has_value(); });
}

void AllocationPlugins::reevaluate() {
  for (auto it = retiring_.begin(); it != retiring_.end();) {
    const auto& alloc_id = it->first;
    auto& r = it->second;
    std::map<std::string, std::string> details{{"plugin_id", r.plugin_id}, {"alloc_id", alloc_id}};
    if (!r.released) {  // an orphan found after a restart: out of the registry first
      r.released = true;
      if (release(alloc_id, r.plugin_id, r.kinds, r.generation) != Released::vacated) {
        status_.remove_fingerprint(r.plugin_id, alloc_id);
        it = retiring_.erase(it);
        continue;
      }
    }
    const std::size_t n = volumes_using_ ? volumes_using_(r.plugin_id) : 0;
    if (n == 0 || served(r.plugin_id, r.kinds)) {
      // No volume waits for it, or another instance took its place: nothing left to show.
      status_.remove_fingerprint(r.plugin_id, alloc_id);
      if (n == 0)
        status_.add_event("plugin", "plugin deregistered: its allocation stopped and no volume on this node needs it",
                          std::move(details));
      it = retiring_.erase(it);
      continue;
    }
    if (n != r.waiting) {
      r.waiting = n;
      r.fingerprint.set_healthy(false);
      r.fingerprint.set_health_description(waiting_text(n));
      r.fingerprint.set_update_time_ms(domain::to_unix_ms(domain::now()));
      kLog.info("stopped plugin instance deregistered; listed for the volumes that wait for a new one",
                {{"alloc", alloc_id}, {"plugin", r.plugin_id}, {"volumes", static_cast<int64_t>(n)}});
      status_.set_fingerprint(r.fingerprint);
    }
    ++it;
  }
}

namespace {

// A healthy, registered instance of `plugin_id` (serving `kind` when given): one that can serve.
bool can_serve(const PluginSupervisor& sup, const std::string& plugin_id, std::optional<PluginKind> kind) {
  const auto kinds = sup.kinds();
  return sup.config().id == plugin_id && sup.generation() != 0 && sup.last_fingerprint().healthy() &&
         (!kind || std::find(kinds.begin(), kinds.end(), *kind) != kinds.end());
}

}  // namespace

PluginSupervisor* AllocationPlugins::newest_allocation_instance(const std::string& plugin_id,
                                                                std::optional<PluginKind> kind,
                                                                const std::string& except_alloc) const {
  const Supervised* best = nullptr;
  for (const auto& [alloc, entry] : supervised_) {
    if (alloc == except_alloc || !can_serve(*entry->supervisor, plugin_id, kind)) continue;
    if (!best || std::pair(entry->create_index, entry->supervisor->generation()) >
                     std::pair(best->create_index, best->supervisor->generation()))
      best = entry.get();
  }
  return best ? best->supervisor.get() : nullptr;
}

PluginSupervisor* AllocationPlugins::newest_healthy(const std::string& plugin_id, PluginKind kind,
                                                    const std::string& except_alloc) const {
  if (auto* best = newest_allocation_instance(plugin_id, kind, except_alloc)) return best;
  // A configured plugin that an allocation's instance had replaced (it kept running).
  if (options_.configured)
    for (auto* sup : options_.configured())
      if (can_serve(*sup, plugin_id, kind)) return sup;
  return nullptr;
}

bool AllocationPlugins::fall_back(const std::string& plugin_id, const std::vector<PluginKind>& kinds,
                                  const std::string& except_alloc) {
  bool any = false;
  for (const auto kind : kinds) {
    if (registry_.lookup(kind, plugin_id)) continue;  // registered again with an earlier kind
    auto* best = newest_healthy(plugin_id, kind, except_alloc);
    if (!best) continue;
    const auto& alloc = best->last_fingerprint().alloc_id();
    kLog.warn(
        "the serving plugin instance ended; falling back to the earlier instance still running",
        {{"plugin", plugin_id}, {"ended_alloc", except_alloc}, {"alloc", alloc.empty() ? "(configured)" : alloc}});
    any = best->register_again() || any;
  }
  return any;
}

void AllocationPlugins::prefer_newest(const std::string& plugin_id) {
  auto* best = newest_allocation_instance(plugin_id, std::nullopt, {});
  if (!best) return;
  const auto kinds = best->kinds();
  const bool serving = std::all_of(kinds.begin(), kinds.end(), [&](PluginKind kind) {
    const auto inst = registry_.lookup(kind, plugin_id);
    return inst && inst->generation == best->generation();
  });
  if (serving) return;
  kLog.info("an older allocation's instance registered after a newer one; the newer serves",
            {{"plugin", plugin_id}, {"alloc", best->last_fingerprint().alloc_id()}});
  best->register_again();
}

asio::awaitable<void> AllocationPlugins::shutdown() {
  if (shut_down_) co_return;
  shut_down_ = true;
  for (auto& [_, entry] : supervised_) entry->supervisor->stop_heartbeat();
  tasks_.cancel();
  co_await tasks_.join();
  for (auto& [_, entry] : supervised_) co_await entry->supervisor->final_fingerprint("agent shutting down");
}

}  // namespace mooring::nodeagent
