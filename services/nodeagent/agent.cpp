#include "services/nodeagent/agent.hpp"

#include "shared/rpc/transport_security.hpp"

#include <sys/stat.h>

#include <grpcpp/impl/service_type.h>

#include <algorithm>
#include <set>

#include "mooring/v1/controlplane.pb.h"
#include "services/nodeagent/allocrunner/volume_mounter.hpp"
#include "services/nodeagent/allocrunner/alloc_manager.hpp"
#include "services/nodeagent/allocrunner/status_reporter.hpp"
#include "services/nodeagent/controlplane/certificate_renewal.hpp"
#include "services/nodeagent/controlplane/controlplane_calls.hpp"
#include "services/nodeagent/controlplane/controlplane_link.hpp"
#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/plugin_manager.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "services/nodeagent/plugins/allocation_plugins.hpp"
#include "services/nodeagent/rpcserver/leader_fence.hpp"
#include "services/nodeagent/rpcserver/nodeagent_service.hpp"
#include "services/nodeagent/rpcserver/operation_cache.hpp"
#include "services/nodeagent/volumes/mount_table.hpp"
#include "services/nodeagent/volumes/volume_manager.hpp"
#include "shared/async/periodic.hpp"
#include "shared/async/sleep.hpp"
#include "shared/async/task_group.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/async/with_timeout.hpp"
#include "shared/log/log.hpp"
#include "shared/rpc/server.hpp"
#include "shared/wire/proto_convert.hpp"

namespace mooring::nodeagent {
namespace {

// How long a fresh mount settles before its first volume stats poll.
constexpr std::chrono::milliseconds kFreshStatsDelay{1000};

namespace asio = boost::asio;
using namespace std::chrono_literals;

const log::Logger kLog{"agent"};

asio::awaitable<void> flush_statuses(StatusReporter& reporter) { (void)co_await reporter.flush(); }

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
      last_contact_(std::chrono::steady_clock::now()),
      processes_(std::make_unique<async::TaskGroup>(ex, "plugin-processes")),
      loops_(std::make_unique<async::TaskGroup>(ex, "agent")) {
  plugins_ = std::make_unique<PluginManager>(ex, *registry_, *status_);
  if (!options_.make_client) {
    // The supervisor's client shares the plugin's channel with the volume and controller calls.
    options_.make_client = [plugins = plugins_.get()](const std::string& plugin_id, const std::string& socket) {
      return plugins->supervisor_client(plugin_id, socket);
    };
  }
  const std::filesystem::path data_dir(config_.data_dir);
  mount_table_ = std::make_unique<ProcMountTable>();
  GrpcControlPlaneOptions cp;
  cp.address = config_.controlplane_addr;
  cp.channel.security = options_.security;  // the peer must be the control plane (peer = server)
  // One view of which control plane leads, for the calls and for the registration link.
  cp.target = make_controlplane_target(cp.address, cp.channel);
  controlplane_target_ = cp.target;
  cp.on_contact = [this](bool answered) { controlplane_contact(answered); };
  controlplane_ = make_grpc_controlplane_calls(cp);

  wire_volumes(data_dir);
  wire_allocations(data_dir);
  wire_link();
}

// The volume manager: mount records under the data dir, releases told to the control plane.
void Agent::wire_volumes(const std::filesystem::path& data_dir) {
  controlplane_back_ = std::make_unique<async::WakeSignal>(ex_);
  stats_now_ = std::make_unique<async::WakeSignal>(ex_);
  released_ = std::make_unique<async::WakeSignal>(ex_);
  VolumeManagerOptions vm;
  vm.controlplane_back = controlplane_back_.get();
  vm.mounted = stats_now_.get();
  vm.released = released_.get();
  vm.mount_root = data_dir / "mounts";
  vm.state_dir = data_dir / "volumes";
  vm.unmount_backoff = options_.release_backoff;
  vm.notify_backoff = options_.release_backoff;
  // The node side is released: tell the control plane (UnpublishVolume). A claim the control
  // plane no longer knows, or that is not this node's, leaves nothing to do here.
  auto notify = [this](const std::string& volume_id, const std::string& alloc_id) -> asio::awaitable<domain::Status> {
    ::mooring::v1::UnpublishVolumeRequest req;
    req.set_volume_id(volume_id);
    req.set_alloc_id(alloc_id);
    req.set_node_id(config_.node_id);
    const auto st = co_await controlplane_->unpublish_volume(req);
    if (st.ok() || st.error_code() == grpc::StatusCode::NOT_FOUND) co_return domain::Status{};
    if (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      kLog.warn("control plane refused the unpublish; nothing left to release here",
                {{"volume", volume_id}, {"alloc", alloc_id}, {"error", st.error_message()}});
      co_return domain::Status{};
    }
    co_return domain::error("UnpublishVolume: " + st.error_message());
  };
  volumes_ = std::make_unique<VolumeManager>(ex_, *plugins_, *mount_table_, notify, vm);
  mounter_ = std::make_unique<VolumeManagerMounter>(*volumes_);
}

// Allocations: their runners, status reports, and the plugin instances they serve.
void Agent::wire_allocations(const std::filesystem::path& data_dir) {
  // A stopped plugin allocation's instance stays registered while a mount record here names its
  // plugin (the waiting unmounts need it to be replaced, not forgotten).
  auto volumes_using = [this](const std::string& plugin_id) {
    std::size_t n = 0;
    for (const auto& r : volumes_->records()) n += r.plugin_id == plugin_id ? 1 : 0;
    return n;
  };
  // A configured plugin that a plugin allocation's instance replaced serves again when it stops.
  auto configured = [this] {
    std::vector<PluginSupervisor*> out;
    for (auto& s : supervisors_) out.push_back(s.get());
    return out;
  };
  allocation_plugins_ = std::make_unique<AllocationPlugins>(
      ex_, *registry_, *status_, volumes_using,
      AllocationPluginsOptions{.make_client = options_.make_client, .configured = configured});

  StatusReporterOptions sr;
  sr.node_id = config_.node_id;
  sr.state_file = data_dir / "alloc-updates.json";
  sr.controlplane_back = controlplane_back_.get();
  sr.batch_window = config_.status_batch_window;
  reporter_ = std::make_unique<StatusReporter>(ex_, *controlplane_, sr);

  AllocManagerOptions am;
  am.node_id = config_.node_id;
  am.state_dir = data_dir / "allocs";
  am.runner.default_kill_timeout = config_.kill_timeout;
  am.runner.node_id = config_.node_id;
  am.runner.node_name = config_.node_name;
  TaskWallsOptions walls;
  walls.rules = task_user_rules(config_);
  walls.namespaces = config_.task_isolation;
  walls.hidden = {config_.data_dir};
  walls.data_dir = config_.data_dir;
  for (const auto& file : {config_.tls_ca_file, config_.tls_cert_file, config_.tls_key_file, config_.config_file})
    if (!file.empty()) walls.hidden.emplace_back(file);
  am.runner.walls = std::move(walls);
  am.csi.claim_backoff =
      async::Backoff{options_.claim_backoff_initial, options_.claim_backoff_max, 2.0, 0.2, config_.claim_timeout};
  am.csi.controlplane_back = controlplane_back_.get();
  am.controlplane_back = controlplane_back_.get();
  am.watch_wait = options_.watch_wait;
  am.disconnect_check_interval = options_.disconnect_check_interval;
  am.plugin_supervision = allocation_plugins_.get();
  // Plugin sockets whose path under allocs/<id>/ would not fit a unix socket (a deep data dir).
  am.plugin_socket_root = data_dir / "ps";
  allocs_ = std::make_unique<AllocManager>(ex_, *controlplane_, *mounter_, *reporter_, am);
  reporter_->set_before_send([this] { return allocs_->states_durable(); });
  reporter_->set_write_behind(
      [this](std::function<void()> write) { allocs_->write_behind("alloc-updates", std::move(write)); });
}

// The link to the control plane (registration, heartbeats), woken by every status change.
void Agent::wire_link() {
  LinkOptions link;
  link.node_id = config_.node_id;
  link.node_name = config_.node_name;
  link.advertise_addr = config_.grpc_addr;
  link.controlplane_addr = config_.controlplane_addr;
  link.channel.security = options_.security;
  link.target = controlplane_target_;
  link.heartbeat_interval = config_.heartbeat_interval;
  link.attributes = domain::task_user_attributes(task_user_rules(config_));
  link.on_contact = [this](bool answered) {
    controlplane_contact(answered);
    if (answered && !contacted_) {
      contacted_ = true;
      update_readiness();
    }
  };
  link.on_heard = [this](std::chrono::steady_clock::time_point sent, std::chrono::milliseconds ttl) {
    allocs_->heard(Heard{sent, ttl});
  };
  // The fencing token (rpcserver/leader_fence.hpp): kept on disk, so a restarted agent refuses
  // a deposed leader's calls before it registers again.
  fence_ = std::make_unique<LeaderFence>(std::filesystem::path(config_.data_dir) / "leader-epoch");
  link.on_leader_epoch = [this](const domain::LeaderEpoch& epoch) { fence_->heard(epoch); };
  link_ = std::make_unique<ControlPlaneLink>(ex_, link, *status_);
  status_->on_change([this] {
    link_->wake();
    plugins_->status_changed();
    allocation_plugins_->wake();
  });
}

int Agent::grpc_port() const { return server_ ? server_->port() : 0; }

std::chrono::steady_clock::duration Agent::disconnected_for() const {
  return std::chrono::steady_clock::now() - last_contact_;
}

std::string Agent::start_grpc_server() {
  if (config_.grpc_addr.empty()) return {};
  // Durable: a publish the plugin ran is not run again when resent after this agent restarts.
  operations_ = std::make_unique<OperationCache>(
      ex_, OperationCacheOptions{.file = std::filesystem::path(config_.data_dir) / "operations"});
  service_ = make_nodeagent_service(ex_, NodeAgentServiceDeps{.node_id = config_.node_id,
                                                              .volumes = *volumes_,
                                                              .plugins = *plugins_,
                                                              .require_controlplane = options_.security != nullptr,
                                                              .operations = operations_.get(),
                                                              .status = status_.get(),
                                                              .fence = fence_.get()});
  rpc::ServerOptions so;
  so.address = config_.grpc_addr;
  so.services = {service_.get()};
  so.health_service = true;
  so.security = options_.security;
  std::string error;
  server_ = rpc::Server::start(so, error);
  if (!server_) return "the NodeAgent gRPC service cannot listen on " + config_.grpc_addr + ": " + error;
  // An OS-chosen port: advertise the one actually bound.
  const auto& addr = config_.grpc_addr;
  if (server_->port() != 0 && addr.size() > 2 && addr.ends_with(":0"))
    link_->set_advertise_addr(addr.substr(0, addr.size() - 1) + std::to_string(server_->port()));
  return {};
}

// Mounts recorded for allocations that will never use them: the agent has no state for the
// allocation (it was lost, or the allocation was removed while the agent was down), or the
// allocation's Postrun ran (it handed its volumes over, and a crash may have come before the
// release reached the mount records, which are written on another thread than the states).
void Agent::release_orphaned_mounts() {
  for (const auto& alloc_id : volumes_->mounted_allocations()) {
    const auto* runner = allocs_->runner(alloc_id);
    if (runner && !runner->state().postrun_done) continue;
    std::vector<std::string> volume_ids;
    for (const auto& r : volumes_->records())
      if (r.alloc_id == alloc_id) volume_ids.push_back(r.volume_id);
    kLog.warn(runner ? "releasing mounts of an allocation whose Postrun already ran"
                     : "releasing mounts of an allocation unknown to this agent",
              {{"alloc", alloc_id}, {"volumes", static_cast<int64_t>(volume_ids.size())}});
    volumes_->release(alloc_id, volume_ids);
  }
}

void Agent::controlplane_contact(bool answered) {
  if (!answered) {
    controlplane_failed_ = true;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  // Back after a failed call, or after a silence longer than a heartbeat and a half: retry what
  // waits on the control plane (release notices, status reports) now, not when their backoff
  // ends. Every caller reports here, so the first answer after an outage wakes them, whichever
  // call it was.
  if (controlplane_failed_ || now - last_contact_ > config_.heartbeat_interval + config_.heartbeat_interval / 2) {
    controlplane_back_->notify();
  }
  controlplane_failed_ = false;
  last_contact_ = now;
}

Agent::~Agent() {
  status_->on_change({});
  loops_->cancel();
}

PluginSupervisor* Agent::supervisor(const std::string& plugin_id, std::optional<PluginRole> role) {
  for (auto& s : supervisors_) {
    if (s->config().id == plugin_id && (!role || s->config().type == *role)) return s.get();
  }
  return nullptr;
}

// Instances persisted by an earlier run that the configuration no longer names: a plugin run by
// someone else whose socket still exists is adopted (supervised as an external socket); anything
// else is gone and deregistered, so it does not linger as "unhealthy" forever.
void Agent::reconcile_persisted_plugins() {
  std::map<std::string, std::vector<PluginInstance>> orphans;
  for (const auto& inst : registry_->list()) {
    // A plugin task's instance belongs to its allocation: supervised again by it, or retired
    // (start(), once the allocations are restored).
    if (!inst.reg.alloc_id.empty()) continue;
    const bool configured = std::any_of(config_.plugins.begin(), config_.plugins.end(),
                                        [&](const PluginConfig& p) { return p.id == inst.reg.plugin_id; });
    if (!configured) orphans[inst.reg.plugin_id].push_back(inst);
  }
  for (const auto& [id, instances] : orphans) {
    // By socket: one socket registered as controller and node is a monolith; a split plugin's two
    // sockets are adopted as its controller and its node.
    std::map<std::string, std::vector<PluginKind>> sockets;
    bool adoptable = true;
    for (const auto& inst : instances) {
      sockets[inst.reg.socket_path].push_back(inst.kind);
      adoptable = adoptable && !inst.reg.launched && is_socket(inst.reg.socket_path);
    }
    if (adoptable) {
      for (const auto& [socket, kinds] : sockets) {
        PluginConfig pc;
        pc.id = id;
        pc.socket = socket;
        pc.type = kinds.size() > 1                          ? PluginRole::monolith
                  : kinds.front() == PluginKind::controller ? PluginRole::controller
                                                            : PluginRole::node;
        kLog.info("adopting a plugin registered before the restart",
                  {{"plugin", id}, {"type", std::string(to_string(pc.type))}, {"socket", pc.socket}});
        config_.plugins.push_back(pc);
      }
      continue;
    }
    for (const auto& inst : instances) registry_->deregister(inst.kind, id, inst.generation);
    status_->add_event("plugin", "plugin deregistered: " + id + " is gone", {{"plugin_id", id}});
  }
}

std::string Agent::start() {
  if (started_) return {};
  // First, so that a taken address starts nothing. Calls it takes wait for the io_context thread,
  // which finishes this function (records loaded, allocations restored) before running any.
  if (auto error = start_grpc_server(); !error.empty()) return error;
  started_ = true;
  if (const auto ec = registry_->load()) {
    kLog.warn("plugin registry could not be loaded", {{"error", ec.message()}});
  }
  reconcile_persisted_plugins();
  status_->add_event("agent", "node agent started");
  for (const auto& pc : config_.plugins) {
    SupervisorContext ctx{*registry_,           *status_,         *processes_,
                          options_.make_client, config_.data_dir, options_.restart_backoff};
    ctx.limits = &plugins_->limits();
    supervisors_.push_back(std::make_unique<PluginSupervisor>(ex_, pc, std::move(ctx)));
    loops_->spawn("supervise-" + pc.id + "-" + std::string(to_string(pc.type)), supervisors_.back()->run());
  }

  // Volumes and allocations: finish releases left by the previous run, restore the
  // allocations (re-adopting their tasks), then follow the control plane.
  if (auto st = volumes_->load(); !st) kLog.error("mount records could not be loaded", {{"error", st.error()}});
  volumes_->resume();
  reporter_->load();
  allocs_->restore();
  release_orphaned_mounts();
  for (const auto& inst : registry_->list()) {
    if (inst.reg.alloc_id.empty()) continue;
    const auto* runner = allocs_->runner(inst.reg.alloc_id);
    if (!runner || runner->state().postrun_done) allocation_plugins_->retire_orphan(inst);
  }
  loops_->spawn("allocation-plugins", allocation_plugins_->run());
  loops_->spawn("alloc-status", reporter_->run());
  loops_->spawn("alloc-watch", allocs_->watch());
  loops_->spawn("alloc-disconnect", allocs_->watch_disconnect([this] { return disconnected_for(); }));
  // After the server: the first registration must advertise the port actually bound (with an
  // OS-chosen port the control plane was otherwise told ":0" and dialled nothing until the next).
  loops_->spawn("controlplane-link", link_->run());
  update_readiness();
  async::PeriodicOptions readiness{.name = "readiness", .period = std::chrono::seconds(1), .jitter = 0};
  if (options_.security) {
    loops_->spawn("tls-expiry", rpc::warn_expiry_daily(options_.security));
    renewal_ = std::make_unique<CertificateRenewal>(
        RenewalOptions{.node_id = config_.node_id, .files = options_.security->files()}, controlplane_target_);
    loops_->spawn("tls-renewal", renewal_->run());
  }
  if (config_.volume_stats_interval.count() > 0) spawn_volume_stats();
  loops_->spawn("readiness", async::periodic(
                                 [this]() -> asio::awaitable<void> {
                                   update_readiness();
                                   co_return;
                                 },
                                 readiness));
  return {};
}

// Volume stats, every --volume-stats-interval and soon after each mount, into the heartbeat.
void Agent::spawn_volume_stats() {
  // In the loops group: shutdown cancels them (a call in flight is cancelled, never awaited),
  // and they hold a volume's lock only for that volume's calls, so a release waits one call at most.
  auto report = [this](std::vector<domain::VolumeStatsReport> reports) {
    std::vector<::mooring::v1::VolumeStats> wire;
    for (const auto& r : reports) wire.push_back(domain::to_proto(r));
    status_->set_volume_stats(wire);
  };
  async::PeriodicOptions every{.name = "volume-stats", .period = config_.volume_stats_interval};
  loops_->spawn("volume-stats",
                async::periodic(
                    [this, report]() -> asio::awaitable<void> { report(co_await volumes_->collect_stats()); }, every));
  // Fresh mounts: polled once they have settled for kFreshStatsDelay, so usage shows up within
  // about a second, a burst of mounts costs one heartbeat, and a mount released within the delay
  // costs no call at all. Polling every mounted volume on each mount (as before) tripled the CSI
  // calls of a busy node and held volume locks that releases then waited on.
  // (Parameters, not captures: the lambda object dies before its coroutine does.)
  loops_->spawn(
      "volume-stats-fresh",
      [](async::WakeSignal& mounted, VolumeManager& volumes, decltype(report) report) -> asio::awaitable<void> {
        auto seen = mounted.generation();
        while (true) {
          seen = co_await mounted.wait(seen);
          if (co_await async::sleep_for(kFreshStatsDelay) == async::SleepEnd::cancelled) co_return;
          seen = mounted.generation();  // the mounts of the delay are in this pass
          report(co_await volumes.collect_fresh_stats());
        }
      }(*stats_now_, *volumes_, report));
}

// grpc.health.v1 on the agent's gRPC address: "" is SERVING while the process serves (liveness);
// kReadinessService is SERVING while the control plane has been reached within three heartbeat
// intervals (readiness: allocations can be placed and released through this node).
void Agent::update_readiness() {
  if (!server_) return;
  const auto limit =
      std::max<std::chrono::steady_clock::duration>(3 * config_.heartbeat_interval, std::chrono::seconds(5));
  server_->set_serving(std::string(kReadinessService), contacted_ && !shut_down_ && disconnected_for() < limit);
}

// Drain mode: stop every allocation and wait, bounded, until their Postrun releases have
// unmounted everything and told the control plane. Whatever is left resumes after the restart.
asio::awaitable<bool> Agent::drain(std::chrono::milliseconds limit) {
  kLog.info("draining: stopping every allocation", {{"allocations", static_cast<int64_t>(allocs_->alloc_ids().size())},
                                                    {"limit_ms", static_cast<int64_t>(limit.count())}});
  allocs_->stop_all("node agent draining");
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (allocs_->all_finished() && volumes_->releases_in_flight() == 0 && volumes_->record_count() == 0) co_return true;
    if (std::chrono::steady_clock::now() >= deadline) co_return false;
    if (co_await async::sleep_for(std::chrono::milliseconds(20)) == async::SleepEnd::cancelled) co_return false;
  }
}

asio::awaitable<void> Agent::shutdown() {
  if (shut_down_) co_return;
  shut_down_ = true;
  update_readiness();
  kLog.info("shutting down", {{"plugins", static_cast<int64_t>(supervisors_.size())}});
  if (config_.drain_on_shutdown.count() > 0) {
    const bool drained = co_await drain(config_.drain_on_shutdown);
    if (drained) {
      kLog.info("drained: every allocation stopped and every volume released");
    } else {
      kLog.warn("drain did not finish in time; the remaining releases resume after the restart",
                {{"mounts", static_cast<int64_t>(volumes_->record_count())},
                 {"releases_in_flight", static_cast<int64_t>(volumes_->releases_in_flight())}});
    }
  }
  // Seed 004: nothing here waits on a plugin. Allocation runners are cancelled (their tasks keep
  // running and are re-adopted after the restart), unfinished unmounts are cancelled with their
  // progress on disk (resume() continues them), the gRPC service stops taking calls.
  if (server_) co_await server_->shutdown(options_.server_grace);
  if (operations_) co_await operations_->shutdown();  // controller calls whose caller is gone
  co_await allocs_->shutdown();
  const bool releases_stopped = co_await volumes_->shutdown(options_.shutdown_grace);
  if (!releases_stopped) kLog.warn("some volume releases did not stop in time; they resume after the restart");
  loops_->cancel();
  co_await loops_->join();
  // The last statuses (e.g. an allocation stopped just now), bounded: they stay on disk otherwise.
  const bool delivered_status = co_await async::with_timeout(flush_statuses(*reporter_), options_.shutdown_grace);
  if (!delivered_status || reporter_->pending() > 0)
    kLog.info("allocation status reports kept for the next run",
              {{"pending", static_cast<int64_t>(reporter_->pending())}});
  // Seed 003: the last fingerprint runs against a closed client, so every plugin is reported
  // unhealthy with a correctly populated fingerprint.
  for (auto& s : supervisors_) co_await s->final_fingerprint("agent shutting down");
  co_await allocation_plugins_->shutdown();
  status_->add_event("agent", "node agent shutting down");
  const bool delivered = co_await link_->send_now(options_.final_heartbeat_timeout);
  kLog.info("final heartbeat", {{"delivered", delivered}});
  for (auto& s : supervisors_) co_await s->stop_and_deregister();
  processes_->cancel();
  co_await processes_->join();
  plugins_->close_all();
  kLog.info("shut down");
}

}  // namespace mooring::nodeagent
