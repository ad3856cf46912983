#include "services/controlplane/control_plane.hpp"

#include <malloc.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/agentclient/router_publisher.hpp"
#include "services/controlplane/agentservice/agent_service.hpp"
#include "services/controlplane/api/api.hpp"
#include "services/controlplane/control_plane_setup.hpp"
#include "services/controlplane/gc/alloc_gc.hpp"
#include "services/controlplane/gc/claim_gc.hpp"
#include "services/controlplane/gc/node_gc.hpp"
#include "services/controlplane/gc/node_loss.hpp"
#include "services/controlplane/gc/release_calls.hpp"
#include "services/controlplane/ha/forwarder.hpp"
#include "services/controlplane/ha/front.hpp"
#include "services/controlplane/ha/leadership.hpp"
#include "services/controlplane/namespaces/namespace_rules.hpp"
#include "services/controlplane/nodes/liveness.hpp"
#include "services/controlplane/nodes/node_registrations.hpp"
#include "services/controlplane/scheduler/drainer.hpp"
#include "services/controlplane/scheduler/system_reconciler.hpp"
#include "services/controlplane/secrets/sealed_backend.hpp"
#include "services/controlplane/state/change_feed.hpp"
#include "services/controlplane/state/etcd/etcd_channels.hpp"
#include "services/controlplane/state/open_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/rpc/server.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;

// Declared in the order they are made: members are destroyed the other way round, so nothing
// outlives what it refers to (the io_context after the store and its users, before the backend).
struct ControlPlane::Parts {
  Parts(const ControlPlaneConfig& f, char** a) : flags(f), argv(a), http_config(http_server_config(f)) {}

  int open_state();
  domain::Status load_state();
  void make_workers();
  int make_api();
  int serve_http();
  int serve_grpc();
  void lead();
  int campaign();
  void shutdown(int signo);
  bool ha_mode() const { return opened.shared != nullptr; }
  bool serving() const { return !ha_mode() || (leadership && leadership->serving()); }

  const ControlPlaneConfig& flags;
  char** argv;
  log::Logger logger{"controlplane"};
  http::ServerConfig http_config;
  OpenedBackend opened;
  std::shared_ptr<const rpc::TransportSecurity> security;
  tls::PairPaths enrollment;
  std::filesystem::path keyring_path;
  std::optional<secrets::SealedBackend> sealed;
  asio::io_context io{1};
  std::optional<ChangeFeed> feed;
  std::function<void(const std::string&)> store_broken;  // etcd: set once the election exists
  std::optional<StateStore> store;
  std::unique_ptr<ha::Leadership> leadership;
  // HA: while etcd has not confirmed the leader's lease in time, writes and calls out are held for
  // up to one lease rather than refused (ha/lease_hold.hpp): etcd's own raft election interrupts
  // nothing. nullopt to go on (held while unconfirmed, then confirmed), or why the call is refused.
  // A coroutine lambda owned here, as main.cpp had it (not a member coroutine behind a forwarding
  // lambda): the router and the agent service hold copies for as long as Parts lives.
  const std::function<asio::awaitable<std::optional<std::string>>()> refused_after_hold =
      [this]() -> asio::awaitable<std::optional<std::string>> {
    if (!leadership) co_return std::nullopt;
    // The hold lets a process that does not lead go on (it has nothing to hold); its calls out
    // must not: it lost the leadership, and restarts as a standby at once.
    if (!leadership->election().leading())
      co_return std::string("this control plane no longer leads; nothing was sent or changed");
    if (co_await leadership->lease_hold().wait_while_unconfirmed()) co_return std::nullopt;
    co_return std::string(
        "etcd has no quorum or cannot be reached: it has not confirmed this leader's lease for a "
        "lease past its end; nothing was sent or changed");
  };
  // HA: the epoch this process was elected with, the fencing token of its calls to agents and
  // of its answers to them (domain/leader_epoch.hpp); nullopt with SQLite and before election.
  const std::function<std::optional<domain::LeaderEpoch>()> leader_epoch =
      [this]() -> std::optional<domain::LeaderEpoch> { return leadership ? leadership->epoch() : std::nullopt; };
  NodeRegistrations registrations;
  std::optional<agentclient::AgentRouter> router;
  std::optional<agentclient::RouterPublisher> publisher;
  std::optional<gc::RouterReleaseCalls> release_calls;
  std::optional<gc::ClaimGc> claim_gc;
  std::optional<gc::NodeLossMonitor> node_loss;
  std::optional<gc::AllocGc> alloc_gc;
  std::optional<gc::NodeGc> node_gc;
  std::optional<scheduler::SystemReconciler> system_reconciler;
  std::optional<scheduler::Drainer> drainer;
  std::optional<volumes::RouterControllerCalls> controller_calls;
  std::optional<volumes::VolumeLifecycle> volume_lifecycle;
  std::unique_ptr<audit::AuditLog> audit_log;
  std::optional<NodeLiveness> liveness;
  std::optional<api::Api> api;
  std::unique_ptr<ha::Forwarder> forwarder;
  std::unique_ptr<ha::Front> front;
  http::Handler api_handler;
  std::optional<http::Server> server;
  std::optional<AgentService> agent_service;
  std::unique_ptr<rpc::Server> grpc_server;
  std::optional<async::TaskGroup> node_tasks;
  std::optional<asio::signal_set> signals;
};

// The backend --state names, secrets sealed on their way to it (secrets/sealed_backend.hpp; the
// keyring written on the first start, before anything is sealed with it), the change feed every
// write passes so the claim GC sees which volumes changed, and the store. SQLite: loaded now, a
// state that does not load is fatal. etcd: loaded only by the elected leader, when it is elected
// (ha/leadership.hpp); until it holds the leader key its backend refuses every write.
int ControlPlane::Parts::open_state() {
  auto backend = open_backend({.url = flags.state,
                               .data_dir = flags.data_dir,
                               .etcd_ca_file = flags.etcd_ca_file,
                               .etcd_cert_file = flags.etcd_cert_file,
                               .etcd_key_file = flags.etcd_key_file});
  if (!backend) {
    logger.error("cannot open state", {{"error", backend.error()}});
    return 1;
  }
  opened = std::move(*backend);
  if (int refused = transport_security(flags, logger, security)) return refused;
  if (int refused = enrollment_ca(flags, logger, enrollment)) return refused;
  keyring_path = flags.keyring_file.empty() ? std::filesystem::path(flags.data_dir) / "keyring"
                                            : std::filesystem::path(flags.keyring_file);
  auto keyring = secrets::Keyring::load_or_new(keyring_path);
  if (!keyring) {
    logger.error("cannot open the keyring", {{"path", keyring_path.string()}, {"error", keyring.error()}});
    return 1;
  }
  sealed.emplace(*opened.backend, std::move(*keyring));
  feed.emplace(*sealed);
  // Group commit: a wave of commits (GC steps, agent reports) shares one fsync; answers and
  // outgoing RPCs wait until what they depend on is durable (see state_store.hpp).
  StateOptions state_options{.group_commit = true};
  if (ha_mode()) state_options.on_broken = [this](const std::string& why) { store_broken(why); };
  store.emplace(io.get_executor(), *feed, state_options);
  if (ha_mode()) {
    opened.shared->require_fence(
        [this](const std::string& why) { asio::post(io, [argv = argv, why] { ha::restart_as_standby(argv, why); }); });
    return 0;
  }
  if (auto st = load_state(); !st) {
    logger.error("cannot load state",
                 {{"state", opened.where}, {"keyring", keyring_path.string()}, {"error", st.error()}});
    return 1;
  }
  return 0;
}

domain::Status ControlPlane::Parts::load_state() {
  auto loaded = store->load();
  // The load held the backend's rows (the state's size again) beside the decoded state; give
  // the freed pages back, or RSS stays at the load's high-water mark (bench: footprint).
  ::malloc_trim(0);
  if (!loaded) return loaded;
  // Upgrade: namespaces in use before they were objects get their records, so none is stranded.
  auto adopt = namespaces::adopt_existing(*store);
  // Upgrade: plugin rows that held every node's instance shrink to their id and indexes (the
  // instances are in the node rows already), so the next registration does not write them whole.
  if (const auto stale = store->stale_plugin_rows(); stale > 0) {
    adopt.rewrite_plugin_rows();
    logger.info("plugin rows rewritten without their nodes' instances", {{"rows", stale}});
  }
  if (!adopt.empty())
    if (auto index = store->commit(std::move(adopt)); !index)
      return domain::error("record the namespaces in use and rewrite the plugin rows: " + index.error());
  logger.info("state loaded", {{"state", opened.where},
                               {"index", store->index()},
                               {"volumes", store->volumes().size()},
                               {"allocations", store->allocations().size()},
                               {"keyring", keyring_path.string()},
                               {"key_id", sealed->active_key_id()}});
  return {};
}

// Node agents: controller calls (publish, unpublish, create, ...) and node detach go through the
// router. A call that finds a node's agent gone waits up to a heartbeat TTL for it to register
// again (by then a silent node is marked down) and is resent to it (agentclient/agent_router.hpp).
void ControlPlane::Parts::make_workers() {
  const auto ex = io.get_executor();
  agentclient::AgentRouterOptions router_options;
  router_options.channel.security = security;
  router_options.hold = refused_after_hold;
  router_options.leader_epoch = leader_epoch;  // every call carries it: agents refuse an older leader's
  router_options.registrations = &registrations;
  router_options.reregistration_wait = flags.heartbeat_ttl;
  router.emplace(ex, *store, router_options);
  publisher.emplace(*router);
  gc::GcOptions gc_options;
  gc_options.backoff.max = flags.gc_retry_max;
  gc_options.backoff.initial = std::min(gc_options.backoff.initial, flags.gc_retry_max);
  gc_options.sweep_period = flags.gc_sweep_period;
  release_calls.emplace(*router);
  claim_gc.emplace(ex, *store, *feed, *release_calls, gc_options);
  node_loss.emplace(ex, *store);
  alloc_gc.emplace(ex, *store, gc::AllocGcOptions{.threshold = flags.alloc_gc_threshold});
  node_gc.emplace(ex, *store, gc::NodeGcOptions{.threshold = flags.node_gc_threshold});
  // System allocations: one copy per eligible node, failed copies replaced, rolling updates.
  system_reconciler.emplace(ex, *store, *feed);
  // Node drains: allocations moved off in the order that keeps volumes releasable.
  drainer.emplace(ex, *store);
  controller_calls.emplace(*router);
  volume_lifecycle.emplace(ex, *store, *controller_calls, [this](const std::string& id) { claim_gc->retry_now(id); });
}

// Who changed what (audit/audit_log.hpp), node liveness (heartbeats in memory, nodes marked down
// after the TTL: the leader's loop) and the REST API.
int ControlPlane::Parts::make_api() {
  auto opened_log = open_audit_log(flags);
  if (!opened_log) {
    logger.error("cannot open the audit log", {{"error", opened_log.error()}});
    return 1;
  }
  audit_log = std::move(*opened_log);
  liveness.emplace(*store,
                   LivenessOptions{.ttl = flags.heartbeat_ttl,
                                   .max_heartbeats_per_second = flags.max_heartbeats_per_second,
                                   .hearing = [this] { return !leadership || leadership->election().lease_valid(); }});
  api::ApiOptions api_options;
  api_options.last_heard = [this](const std::string& node_id) { return liveness->last_heard(node_id); };
  api_options.audit = audit_log.get();
  api_options.cors.read_origins = flags.cors_read_origins;
  api_options.cors.write_origins = flags.cors_write_origins;
  api_options.keyring = &*sealed;
  api_options.acl = flags.acl;
  api_options.enrollment_ca = enrollment;
  api_options.node_cert_ttl = std::chrono::duration_cast<std::chrono::seconds>(flags.node_cert_ttl);
  api.emplace(*store, *volume_lifecycle, api_options);
  api_handler = [this](http::Request r) { return api->handle(std::move(r)); };
  return 0;
}

// The REST API. With etcd the leader serves `api`; a standby answers the status routes and
// forwards the rest (ha/front.hpp). The leader's REST certificate is checked against our CA; we
// present our own, by which the leader knows a forward (and believes the caller it names). A
// leader that does not answer within twice the lease has lost it: the client gets a 503 at once.
int ControlPlane::Parts::serve_http() {
  if (ha_mode()) {
    auto made = ha::Forwarder::make(
        io.get_executor(),
        {.ca_file = flags.tls_ca_file, .cert_file = flags.tls_cert_file, .key_file = flags.tls_key_file},
        {.connect = std::chrono::seconds(1), .answer = 2 * flags.leader_lease});
    if (!made) {
      logger.error("cannot forward to the leader", {{"error", made.error()}});
      return 1;
    }
    forwarder = std::move(*made);
  }
  http_config.refused = [this](const http::Request& r, const http::Response& res) { api->record_refusal(r, res); };
  server.emplace(io.get_executor(), http_config,
                 [this](http::Request r) { return front ? front->handle(std::move(r)) : api_handler(std::move(r)); });
  if (auto tls = server->reload_tls(); !tls) {
    logger.error("cannot serve HTTPS", {{"error", tls.error()}});
    return 1;
  }
  if (auto ec = server->listen()) {
    logger.error("cannot listen", {{"addr", flags.http_addr}, {"error", ec.message()}});
    return 1;
  }
  server->start();
  return 0;
}

// The node agents' RPC service. A standby names the leader to agents; a degraded leader refuses.
int ControlPlane::Parts::serve_grpc() {
  AgentServiceOptions agent_options{
      .require_node_identity = security != nullptr,
      .audit = audit_log.get(),
      .registrations = &registrations,
      .renewal_ca = enrollment,
      .node_cert_ttl = std::chrono::duration_cast<std::chrono::seconds>(flags.node_cert_ttl)};
  if (ha_mode()) {
    agent_options.standby = [this]() -> std::optional<std::string> {
      if (serving()) return std::nullopt;
      auto leader = leadership ? leadership->election().leader() : std::nullopt;
      return leader && !leadership->election().leading() ? leader->grpc_addr : std::string{};
    };
    agent_options.hold = refused_after_hold;
    agent_options.leader_epoch = leader_epoch;
    agent_options.writes_refused = [this]() -> std::optional<std::string> {
      if (!leadership || !leadership->election().degraded()) return std::nullopt;
      return "etcd has no quorum or cannot be reached: this control plane (the leader) refuses every call until it "
             "answers again; nothing was changed";
    };
  }
  agent_service.emplace(io.get_executor(), *store, *liveness, &*publisher, agent_options);
  std::string grpc_error;
  grpc_server = rpc::Server::start(
      rpc::ServerOptions{.address = flags.grpc_addr, .services = {agent_service->service()}, .security = security},
      grpc_error);
  if (!grpc_server) {
    logger.error("cannot listen", {{"addr", flags.grpc_addr}, {"error", grpc_error}});
    return 1;
  }
  logger.info("grpc api listening",
              {{"addr", flags.grpc_addr}, {"port", grpc_server->port()}, {"heartbeat_ttl", flags.heartbeat_ttl}});
  node_tasks.emplace(io.get_executor(), "nodes");
  if (security) watch_certificates(*node_tasks, *server, security, logger);
  return 0;
}

// What only the leader runs: the same start after an election as after a restart.
void ControlPlane::Parts::lead() {
  node_tasks->spawn("liveness", [this] { return liveness->run(); });
  claim_gc->start();  // resumes every release that was under way when we stopped
  node_loss->start();
  alloc_gc->start();
  node_gc->start();
  system_reconciler->start();  // resumes groups and rolling updates where the state left them
  drainer->start();            // resumes drains where the state left them
  volume_lifecycle->start();   // resumes deletes whose outcome was unknown when we stopped
  // The line scripts and tests wait for; it carries the bound port (useful with port 0).
  logger.info("http api listening", {{"addr", http_config.address},
                                     {"port", server->port()},
                                     {"scheme", server->secure() ? "https" : "http"},
                                     {"grpc_addr", flags.grpc_addr},
                                     {"acl", flags.acl ? "on" : "off"},
                                     {"role", ha_mode() ? "leader" : "single"}});
}

// etcd: a standby until elected. The election's channels are its own; elected, the leadership
// loads the state and leads (lead()).
int ControlPlane::Parts::campaign() {
  auto channel = EtcdChannels::make(*opened.etcd);
  if (!channel) {
    logger.error("cannot reach etcd", {{"error", channel.error()}});
    return 1;
  }
  ha::ElectionOptions election_options{
      .etcd = *channel,
      .key = opened.etcd->prefix + "/leader",
      .self = advertised(flags, server->secure(), server->port(), grpc_server->port(), logger),
      .lease = flags.leader_lease,
      .campaign_delay = ha::campaign_delay(flags.leader_lease),
  };
  const std::string self_http = election_options.self.http_addr;
  leadership = std::make_unique<ha::Leadership>(
      ha::LeadershipParts{.executor = io.get_executor(),
                          .argv = argv,
                          .store = *store,
                          .backend = *opened.shared,
                          .tasks = *node_tasks,
                          .load_state = [this] { return load_state(); },
                          .lead = [this] { lead(); },
                          .pause_calls = [this](std::optional<std::string> why) { router->set_paused(std::move(why)); },
                          .resumed =
                              [this] {
                                // Their backoff grew while etcd could not be reached.
                                for (const auto& [key, v] : store->volumes()) claim_gc->retry_now(key);
                                liveness->grant_grace();  // heartbeats were refused meanwhile
                              }},
      std::move(election_options));
  store_broken = [this](const std::string& why) { leadership->store_broken(why); };
  front = std::make_unique<ha::Front>(
      leadership->election(), leadership->lease_hold(), *forwarder, api_handler, [this] { return serving(); },
      flags.stale_reads_max, self_http);
  leadership->start();
  logger.info("standby until elected", {{"addr", http_config.address},
                                        {"port", server->port()},
                                        {"advertise_http_addr", self_http},
                                        {"state", opened.where},
                                        {"leader_lease", flags.leader_lease}});
  return 0;
}

void ControlPlane::Parts::shutdown(int signo) {
  logger.info("shutting down", {{"signal", signo}, {"grace", flags.shutdown_grace}});
  store->release_waiters();  // blocking queries answer now instead of holding the shutdown
  node_tasks->cancel();
  asio::co_spawn(
      io,
      [this]() -> asio::awaitable<void> {
        co_await claim_gc->stop();
        co_await node_loss->stop();
        co_await alloc_gc->stop();
        co_await node_gc->stop();
        co_await system_reconciler->stop();
        co_await drainer->stop();
        co_await volume_lifecycle->stop();
      },
      [this](std::exception_ptr e) {
        if (e) logger.error("background shutdown failed");
      });
  asio::co_spawn(io, grpc_server->shutdown(flags.shutdown_grace), [this](std::exception_ptr e) {
    if (e) logger.error("grpc shutdown failed");
  });
  asio::co_spawn(io, server->shutdown(flags.shutdown_grace), [this](std::exception_ptr e) {
    if (e) logger.error("http shutdown failed");
    if (leadership) leadership->election().stop();  // a leader hands over at once (its lease revoked)
    logger.info("stopped", {{"index", store->index()}});
  });
}

ControlPlane::ControlPlane(const ControlPlaneConfig& flags, char** argv)
    : parts_(std::make_unique<Parts>(flags, argv)) {}
ControlPlane::~ControlPlane() = default;

int ControlPlane::run() {
  auto& p = *parts_;
  if (int refused = p.open_state()) return refused;
  p.make_workers();
  if (int refused = p.make_api()) return refused;
  if (int refused = p.serve_http()) return refused;
  if (int refused = p.serve_grpc()) return refused;
  if (!p.ha_mode()) {
    p.lead();
  } else if (int refused = p.campaign()) {
    return refused;
  }
  p.signals.emplace(p.io, SIGINT, SIGTERM);
  p.signals->async_wait([&p](const boost::system::error_code& ec, int signo) {
    if (!ec) p.shutdown(signo);
  });
  p.io.run();
  return 0;
}

}  // namespace mooring::controlplane
