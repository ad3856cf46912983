#include "services/nodeagent/agent.hpp"

#include <sys/stat.h>

#include "services/nodeagent/controlplane_link.hpp"
#include "services/nodeagent/node_status.hpp"
#include "services/nodeagent/plugins/grpc_plugin_client.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "shared/async/task_group.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

const log::Logger& logger() {
  static const log::Logger l{"agent"};
  return l;
}

bool is_socket(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

Agent::Agent(asio::any_io_executor ex, AgentConfig config, AgentOptions options)
    : ex_(ex),
      config_(std::move(config)),
      options_(std::move(options)),
      registry_(std::make_unique<PluginRegistry>(std::filesystem::path(config_.data_dir) / "plugins.json")),
      status_(std::make_unique<NodeStatus>()),
      processes_(std::make_unique<async::TaskGroup>(ex, "plugin-processes")),
      loops_(std::make_unique<async::TaskGroup>(ex, "agent")) {
  if (!options_.make_client) options_.make_client = make_grpc_plugin_client;
  LinkOptions link;
  link.node_id = config_.node_id;
  link.node_name = config_.node_name;
  link.advertise_addr = config_.grpc_addr;
  link.controlplane_addr = config_.controlplane_addr;
  link.heartbeat_interval = config_.heartbeat_interval;
  link_ = std::make_unique<ControlPlaneLink>(ex, link, *status_);
  status_->on_change([this] { link_->wake(); });
}

Agent::~Agent() {
  status_->on_change({});
  loops_->cancel();
}

PluginSupervisor* Agent::supervisor(const std::string& plugin_id) {
  for (auto& s : supervisors_) {
    if (s->config().id == plugin_id) return s.get();
  }
  return nullptr;
}

// Instances persisted by an earlier run that the configuration no longer names: a plugin run by
// someone else whose socket still exists is adopted (supervised as an external socket); anything
// else is gone and deregistered, so it does not linger as "unhealthy" forever.
void Agent::reconcile_persisted_plugins() {
  std::map<std::string, std::vector<PluginInstance>> orphans;
  for (const auto& inst : registry_->list()) {
    const bool configured = std::any_of(config_.plugins.begin(), config_.plugins.end(),
                                        [&](const PluginConfig& p) { return p.id == inst.reg.plugin_id; });
    if (!configured) orphans[inst.reg.plugin_id].push_back(inst);
  }
  for (const auto& [id, instances] : orphans) {
    const auto& first = instances.front();
    if (!first.reg.launched && is_socket(first.reg.socket_path)) {
      PluginConfig pc;
      pc.id = id;
      pc.socket = first.reg.socket_path;
      const bool controller = std::any_of(instances.begin(), instances.end(),
                                          [](const auto& i) { return i.kind == PluginKind::controller; });
      const bool node = std::any_of(instances.begin(), instances.end(),
                                    [](const auto& i) { return i.kind == PluginKind::node; });
      pc.type = controller && node ? PluginRole::monolith : controller ? PluginRole::controller : PluginRole::node;
      logger().info("adopting a plugin registered before the restart", {{"plugin", id}, {"socket", pc.socket}});
      config_.plugins.push_back(pc);
      continue;
    }
    for (const auto& inst : instances) registry_->deregister(inst.kind, id, inst.generation);
    status_->add_event("plugin", "plugin deregistered: " + id + " is gone", {{"plugin_id", id}});
  }
}

void Agent::start() {
  if (started_) return;
  started_ = true;
  if (const auto ec = registry_->load()) {
    logger().warn("plugin registry could not be loaded", {{"error", ec.message()}});
  }
  reconcile_persisted_plugins();
  status_->add_event("agent", "node agent started");
  for (const auto& pc : config_.plugins) {
    SupervisorContext ctx{*registry_, *status_, *processes_, options_.make_client, config_.data_dir,
                          options_.restart_backoff};
    supervisors_.push_back(std::make_unique<PluginSupervisor>(ex_, pc, std::move(ctx)));
    loops_->spawn("supervise-" + pc.id, supervisors_.back()->run());
  }
  loops_->spawn("controlplane-link", link_->run());
}

asio::awaitable<void> Agent::shutdown() {
  if (shut_down_) co_return;
  shut_down_ = true;
  logger().info("shutting down", {{"plugins", static_cast<int64_t>(supervisors_.size())}});
  loops_->cancel();
  co_await loops_->join();
  // Seed 003: the last fingerprint runs against a closed client, so every plugin is reported
  // unhealthy with a correctly populated fingerprint.
  for (auto& s : supervisors_) co_await s->final_fingerprint("agent shutting down");
  status_->add_event("agent", "node agent shutting down");
  const bool delivered = co_await link_->send_now(options_.final_heartbeat_timeout);
  logger().info("final heartbeat", {{"delivered", delivered}});
  for (auto& s : supervisors_) co_await s->stop_and_deregister();
  processes_->cancel();
  co_await processes_->join();
  logger().info("shut down");
}

}  // namespace mooring::nodeagent
