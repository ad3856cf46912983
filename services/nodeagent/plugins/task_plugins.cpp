#include "services/nodeagent/plugins/task_plugins.hpp"

#include <algorithm>

#include "services/nodeagent/node_status.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;

const log::Logger& logger() {
  static const log::Logger l{"task-plugins"};
  return l;
}

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

TaskPlugins::TaskPlugins(asio::any_io_executor ex, PluginRegistry& registry, NodeStatus& status,
                         VolumesUsingPlugin volumes_using, TaskPluginsOptions options)
    : ex_(ex),
      registry_(registry),
      status_(status),
      volumes_using_(std::move(volumes_using)),
      options_(std::move(options)),
      wake_(std::make_unique<async::WakeSignal>(ex)),
      tasks_(ex, "task-plugins") {}

TaskPlugins::~TaskPlugins() { tasks_.cancel(); }

PluginSupervisor* TaskPlugins::supervisor(const std::string& alloc_id) {
  auto it = supervised_.find(alloc_id);
  return it == supervised_.end() ? nullptr : it->second->supervisor.get();
}

std::vector<std::string> TaskPlugins::retiring() const {
  std::vector<std::string> out;
  for (const auto& [alloc, _] : retiring_) out.push_back(alloc);
  return out;
}

asio::awaitable<domain::Status> TaskPlugins::supervise(const std::string& alloc_id, std::uint64_t create_index,
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
  logger().info("supervising a plugin task", {{"alloc", alloc_id}, {"plugin", plugin.id}, {"socket", socket_path}});
  if (auto failed = co_await entry->supervisor->adopt()) co_return domain::error(*failed);
  if (!supervised_.contains(alloc_id) || supervised_[alloc_id] != entry) co_return domain::Status{};  // stopped meanwhile
  prefer_newest(plugin.id);
  tasks_.spawn("plugin-task-" + alloc_id, [entry]() -> asio::awaitable<void> { co_await entry->supervisor->heartbeat(); });
  co_return domain::Status{};
}

void TaskPlugins::stopped(const std::string& alloc_id) {
  auto it = supervised_.find(alloc_id);
  if (it == supervised_.end()) {
    // Not supervised in this run (its task ended while the agent was down): what the registry
    // still holds of it is retired all the same.
    for (const auto& inst : registry_.list())
      if (inst.reg.alloc_id == alloc_id) retire_orphan(inst);
    return;
  }
  auto entry = it->second;
  supervised_.erase(it);
  entry->supervisor->stop_heartbeat();
  // The final fingerprint runs against a closed client (seed 003): reported unhealthy with
  // everything else it knew; then the registry entry is retired by the rules above.
  tasks_.spawn("plugin-task-stopped-" + alloc_id, [this, entry, alloc_id]() -> asio::awaitable<void> {
    co_await entry->supervisor->final_fingerprint("plugin allocation stopped");
    retire(alloc_id, *entry->supervisor);
  });
}

void TaskPlugins::retire(const std::string& alloc_id, const PluginSupervisor& supervisor) {
  const auto& id = supervisor.config().id;
  if (supervisor.generation() == 0) {
    // Never registered (it did not become healthy): nothing to keep listed.
    status_.remove_fingerprint(id, alloc_id);
    return;
  }
  Retiring r;
  r.plugin_id = id;
  r.kinds = supervisor.kinds();
  r.generation = supervisor.generation();
  r.fingerprint = supervisor.last_fingerprint();
  retiring_[alloc_id] = std::move(r);
  reevaluate();
}

void TaskPlugins::retire_orphan(const PluginInstance& instance) {
  const auto& alloc_id = instance.reg.alloc_id;
  if (alloc_id.empty() || supervised_.contains(alloc_id)) return;
  auto& r = retiring_[alloc_id];
  if (std::find(r.kinds.begin(), r.kinds.end(), instance.kind) == r.kinds.end()) r.kinds.push_back(instance.kind);
  r.plugin_id = instance.reg.plugin_id;
  r.generation = instance.generation;
  auto& fp = r.fingerprint;
  fp.set_plugin_id(instance.reg.plugin_id);
  fp.set_alloc_id(alloc_id);
  fp.set_provider(instance.reg.provider);
  fp.set_version(instance.reg.version);
  fp.set_type(r.kinds.size() > 1 ? v1::PLUGIN_TYPE_MONOLITH
              : r.kinds.front() == PluginKind::controller ? v1::PLUGIN_TYPE_CONTROLLER
                                                          : v1::PLUGIN_TYPE_NODE);
  logger().info("retiring the plugin instance of an allocation that stopped while the agent was down",
                {{"alloc", alloc_id}, {"plugin", instance.reg.plugin_id}});
  wake();
}

void TaskPlugins::wake() { wake_->notify(); }

asio::awaitable<void> TaskPlugins::run() {
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

void TaskPlugins::reevaluate() {
  for (auto it = retiring_.begin(); it != retiring_.end();) {
    const auto& alloc_id = it->first;
    auto& r = it->second;
    const bool still_registered = std::any_of(r.kinds.begin(), r.kinds.end(), [&](PluginKind kind) {
      const auto inst = registry_.lookup(kind, r.plugin_id);
      return inst && inst->generation == r.generation;
    });
    std::map<std::string, std::string> details{{"plugin_id", r.plugin_id}, {"alloc_id", alloc_id}};
    if (still_registered && fall_back(r.plugin_id, alloc_id)) {
      status_.add_event("plugin", "plugin instance of a stopped allocation replaced by the older instance still running",
                        std::move(details));
      status_.remove_fingerprint(r.plugin_id, alloc_id);
      it = retiring_.erase(it);
      continue;
    }
    if (!still_registered) {
      // A newer instance serves the plugin id: only this allocation's fingerprint goes.
      logger().info("stopped plugin instance replaced by a newer one", {{"alloc", alloc_id}, {"plugin", r.plugin_id}});
      status_.remove_fingerprint(r.plugin_id, alloc_id);
      it = retiring_.erase(it);
      continue;
    }
    const std::size_t n = volumes_using_ ? volumes_using_(r.plugin_id) : 0;
    if (n == 0) {
      for (const auto kind : r.kinds) registry_.deregister(kind, r.plugin_id, r.generation);
      status_.remove_fingerprint(r.plugin_id, alloc_id);
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
      logger().info("stopped plugin instance kept for the volumes that still need it",
                    {{"alloc", alloc_id}, {"plugin", r.plugin_id}, {"volumes", static_cast<int64_t>(n)}});
      status_.set_fingerprint(r.fingerprint);
    }
    ++it;
  }
}

PluginSupervisor* TaskPlugins::newest_healthy(const std::string& plugin_id, const std::string& except_alloc) const {
  const Supervised* best = nullptr;
  for (const auto& [alloc, entry] : supervised_) {
    const auto& sup = *entry->supervisor;
    if (alloc == except_alloc || sup.config().id != plugin_id || sup.generation() == 0) continue;
    if (!sup.last_fingerprint().healthy()) continue;
    if (!best || std::pair(entry->create_index, sup.generation()) >
                     std::pair(best->create_index, best->supervisor->generation()))
      best = entry.get();
  }
  return best ? best->supervisor.get() : nullptr;
}

bool TaskPlugins::fall_back(const std::string& plugin_id, const std::string& except_alloc) {
  auto* best = newest_healthy(plugin_id, except_alloc);
  if (!best) return false;
  logger().warn("the serving plugin instance ended; falling back to the other instance still running",
                {{"plugin", plugin_id}, {"ended_alloc", except_alloc}, {"alloc", best->last_fingerprint().alloc_id()}});
  return best->register_again();
}

void TaskPlugins::prefer_newest(const std::string& plugin_id) {
  auto* best = newest_healthy(plugin_id);
  if (!best) return;
  const auto kinds = best->kinds();
  const bool serving = std::all_of(kinds.begin(), kinds.end(), [&](PluginKind kind) {
    const auto inst = registry_.lookup(kind, plugin_id);
    return inst && inst->generation == best->generation();
  });
  if (serving) return;
  logger().info("an older allocation's instance registered after a newer one; the newer serves",
                {{"plugin", plugin_id}, {"alloc", best->last_fingerprint().alloc_id()}});
  best->register_again();
}

asio::awaitable<void> TaskPlugins::shutdown() {
  if (shut_down_) co_return;
  shut_down_ = true;
  for (auto& [_, entry] : supervised_) entry->supervisor->stop_heartbeat();
  tasks_.cancel();
  co_await tasks_.join();
  for (auto& [_, entry] : supervised_) co_await entry->supervisor->final_fingerprint("agent shutting down");
}

}  // namespace mooring::nodeagent
