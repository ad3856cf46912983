// mooring-controlplane: wiring only — flags, logging, the state store, the REST API on Beast,
// the node agents' gRPC service, the claim GC and node-loss handling, and a graceful stop on
// SIGINT/SIGTERM.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <variant>
#include <iostream>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/controlplane/agentservice/agent_service.hpp"
#include "services/controlplane/agentclient/agent_router.hpp"
#include "services/controlplane/agentclient/router_publisher.hpp"
#include "services/controlplane/api/api.hpp"
#include "services/controlplane/audit/audit_log.hpp"
#include "services/controlplane/claims/fault_switch.hpp"
#include "services/controlplane/config/controlplane_config.hpp"
#include "services/controlplane/gc/alloc_gc.hpp"
#include "services/controlplane/gc/node_gc.hpp"
#include "services/controlplane/state/change_feed.hpp"
#include "services/controlplane/gc/claim_gc.hpp"
#include "services/controlplane/gc/node_loss.hpp"
#include "services/controlplane/scheduler/system_reconciler.hpp"
#include "services/controlplane/ha/forwarder.hpp"
#include "services/controlplane/ha/front.hpp"
#include "services/controlplane/ha/leader_election.hpp"
#include "services/controlplane/ha/leadership.hpp"
#include "services/controlplane/http/query.hpp"
#include "services/controlplane/http/server.hpp"
#include "services/controlplane/namespaces/namespace_rules.hpp"
#include "services/controlplane/nodes/liveness.hpp"
#include "services/controlplane/nodes/node_registrations.hpp"
#include "services/controlplane/secrets/sealed_backend.hpp"
#include "services/controlplane/state/etcd/etcd_backend.hpp"
#include "services/controlplane/state/etcd/etcd_channels.hpp"
#include "services/controlplane/state/sqlite/sqlite_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/async/task_group.hpp"
#include "shared/config/host_port.hpp"
#include "shared/config/settings.hpp"
#include "shared/domain/ids.hpp"
#include "shared/log/async_writer.hpp"
#include "shared/log/log.hpp"
#include "shared/metrics/families.hpp"
#include "shared/process/process_hygiene.hpp"
#include "shared/rpc/server.hpp"
#include "shared/rpc/transport_security.hpp"
#include "shared/tls/cert_files.hpp"

namespace asio = boost::asio;
using namespace mooring;
using namespace mooring::controlplane;

namespace {

const log::Logger logger{"controlplane"};

// The API keeps up to --http-max-connections sockets and gRPC and SQLite need descriptors too,
// while the soft limit is often 1024: take the hard limit, as Go's runtime does.
void raise_open_file_limit(const log::Logger& log) {
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0)
      log.warn("cannot raise the open-file limit", {{"error", std::string(std::strerror(errno))}});
  }
}

http::ServerConfig http_server_config(const ControlPlaneConfig& flags) {
  http::ServerConfig config;
  const auto listen = config::parse_host_port(flags.http_addr).value();  // validated by the parser
  config.address = listen.host;
  config.port = listen.port;
  config.max_connections = flags.http_max_connections;
  config.max_connections_per_client = flags.http_max_connections_per_client;
  // HTTPS with the same certificate as the agents' gRPC port (none with --insecure).
  // With etcd (HA) the other control planes are asked for their certificate: a standby's
  // forward then names its client to the leader (ha/front.hpp).
  config.tls = {.cert_file = flags.tls_cert_file,
                .key_file = flags.tls_key_file,
                .client_ca_file = flags.http_client_ca_file,
                .peer_ca_file = flags.state.starts_with("etcd://") ? flags.tls_ca_file : std::string()};
  return config;
}

// The agents' gRPC port: mutual TLS when the files are given (agents must present a certificate
// from the CA naming their node), plaintext only with --insecure. Returns the exit code when the
// control plane must not start (0: go on; `security` stays null for plaintext).
int transport_security(const ControlPlaneConfig& flags, const log::Logger& log,
                       std::shared_ptr<const rpc::TransportSecurity>& security) {
  if (!flags.tls_cert_file.empty()) {
    auto loaded = rpc::TransportSecurity::load({flags.tls_ca_file, flags.tls_cert_file, flags.tls_key_file},
                                               tls::Identity{tls::Role::server, {}});
    if (!loaded) {
      log.error("cannot use the TLS files", {{"error", loaded.error()}});
      return 1;
    }
    security = *loaded;
    rpc::log_certificate_status(*security);
    return 0;
  }
  if (flags.insecure) {
    log.warn("--insecure: the gRPC port is plaintext; any process that reaches it can act as any node",
             {{"grpc_addr", flags.grpc_addr}});
    return 0;
  }
  // Secure by default: plaintext is a choice made with --insecure, never the result of a
  // forgotten flag.
  log.error(
      "refusing to serve plaintext: give --tls-ca-file, --tls-cert-file and --tls-key-file (make them "
      "with `mooring tls`), or --insecure to accept that anyone who reaches the ports can act as any node",
      {{"grpc_addr", flags.grpc_addr}, {"http_addr", flags.http_addr}});
  return 2;
}

// Node enrollment signs with the CA of --tls-ca-file and the key of --tls-ca-key-file: a key that
// is missing or does not match stops the start, rather than the first node's enrollment.
int enrollment_ca(const ControlPlaneConfig& flags, const log::Logger& log, tls::PairPaths& out) {
  if (flags.tls_ca_key_file.empty()) return 0;
  out = {flags.tls_ca_file, flags.tls_ca_key_file};
  auto ca = tls::read_pair(out);
  if (!ca) {
    log.error("cannot use --tls-ca-key-file", {{"error", ca.error()}});
    return 1;
  }
  if (!tls::key_matches(ca->cert_pem, ca->key_pem)) {
    log.error("cannot use --tls-ca-key-file: it is not the key of --tls-ca-file",
              {{"tls_ca_file", flags.tls_ca_file}, {"tls_ca_key_file", flags.tls_ca_key_file}});
    return 1;
  }
  log.info("node enrollment and renewal on: nodes' CSRs are signed with the CA",
           {{"tls_ca_file", flags.tls_ca_file}, {"node_cert_ttl", flags.node_cert_ttl}});
  return 0;
}

domain::Expected<std::unique_ptr<audit::AuditLog>> open_audit_log(const ControlPlaneConfig& flags) {
  std::vector<std::filesystem::path> files{std::filesystem::path(flags.data_dir) / "audit.log"};
  if (!flags.audit_log.empty()) files.emplace_back(flags.audit_log);
  return audit::AuditLog::open(files);
}

// gRPC picks renewed certificates up from the files; SIGHUP reloads the REST API's HTTPS (new
// connections use the new files), logs the certificate in use and re-checks expiry at once, and
// a daily check warns 30 days ahead.
void watch_certificates(async::TaskGroup& tasks, http::Server& server,
                        std::shared_ptr<const rpc::TransportSecurity> security) {
  tasks.spawn("tls-expiry", [security] { return rpc::warn_expiry_daily(security); });
  tasks.spawn("tls-sighup", [&server, security]() -> asio::awaitable<void> {
    asio::signal_set hup(co_await asio::this_coro::executor, SIGHUP);
    for (;;) {
      co_await hup.async_wait(asio::use_awaitable);
      if (auto tls = server.reload_tls(); !tls)
        logger.error("HTTPS reload failed; the old files stay in use", {{"error", tls.error()}});
      rpc::log_certificate_status(*security);
    }
  });
}

// Where other control planes and agents reach this one: the flags, else the listen addresses.
ha::LeaderRecord advertised(const ControlPlaneConfig& flags, bool https, std::uint16_t http_port, int grpc_port) {
  ha::LeaderRecord self;
  self.id = domain::new_id();
  // A port of 0 in the flags: the one the listener was given.
  if (!flags.advertise_http_addr.empty()) {
    self.http_addr = flags.advertise_http_addr;
  } else {
    auto listen = config::parse_host_port(flags.http_addr).value();
    listen.port = http_port;
    self.http_addr = std::string(https ? "https://" : "http://") + config::to_string(listen);
  }
  if (!flags.advertise_grpc_addr.empty()) {
    self.grpc_addr = flags.advertise_grpc_addr;
  } else {
    auto listen = config::parse_host_port(flags.grpc_addr).value();
    listen.port = static_cast<std::uint16_t>(grpc_port);
    self.grpc_addr = config::to_string(listen);
  }
  if (self.http_addr.find("0.0.0.0") != std::string::npos || self.grpc_addr.starts_with("0.0.0.0"))
    logger.warn(
        "listening on 0.0.0.0: give --advertise-http-addr and --advertise-grpc-addr, or standbys and agents "
        "cannot reach this control plane when it leads",
        {{"http_addr", self.http_addr}, {"grpc_addr", self.grpc_addr}});
  return self;
}

}  // namespace

int main(int argc, char** argv) {
  // Output goes to pipes (run-local's tee, a log collector): a reader that died first (Ctrl-C
  // reaches tee too) must not kill the control plane by SIGPIPE before its shutdown runs.
  process::survive_closed_pipes();
  // gRPC resolves names (etcd endpoints, agents' addresses) with getaddrinfo, as everything else
  // on the host does (/etc/hosts, nsswitch; Kubernetes' cluster DNS through resolv.conf). Its
  // c-ares resolver also leaked at exit under the sanitizers here. A user's own choice stands.
  ::setenv("GRPC_DNS_RESOLVER", "native", 0);
  auto parsed =
      parse_controlplane_config(std::vector<std::string>(argv, argv + argc), config::environment("MOORING_CP_"));
  if (const auto* error = std::get_if<ControlPlaneConfigError>(&parsed)) {
    std::cerr << "mooring-controlplane: " << error->message << "\n";
    return 2;
  }
  const auto& args = std::get<ControlPlaneArgs>(parsed);
  if (args.help) {
    std::cout << controlplane_config_help();
    return 0;
  }
  if (args.help_markdown) {
    std::cout << controlplane_config_markdown();
    return 0;
  }
  if (auto refusal = fault_switch_refusal()) {
    std::cerr << "mooring-controlplane: " << *refusal << "\n";
    return 2;
  }
  const ControlPlaneConfig& flags = args.config;
  log::configure(flags.log_level, flags.log_format);
  // Lines are written by a thread of their own, not by the io_context thread (issue 21).
  // Destroyed last, after writing every queued line.
  log::AsyncWriter log_writer;

  raise_open_file_limit(logger);
  // Before anything that records is built: each component takes its handles when constructed.
  if (flags.metrics) metrics::enable(metrics::Service::controlplane);
  http::ServerConfig http_config = http_server_config(flags);

  // The embedded SQLite file, or etcd (state/etcd_backend.hpp) for control planes that share it.
  std::unique_ptr<StateBackend> backend;
  EtcdBackend* etcd_backend = nullptr;  // set when the state is in etcd: high availability
  EtcdOptions etcd_options;
  std::string state_where;
  if (flags.state.starts_with("etcd://")) {
    auto options = parse_etcd_url(flags.state);  // validated by the parser
    options->ca_file = flags.etcd_ca_file;
    options->cert_file = flags.etcd_cert_file;
    options->key_file = flags.etcd_key_file;
    etcd_options = *options;
    auto etcd = EtcdBackend::open(std::move(*options));
    if (!etcd) {
      logger.error("cannot open state", {{"error", etcd.error()}});
      return 1;
    }
    state_where = (*etcd)->describe();
    etcd_backend = etcd->get();
    backend = std::move(*etcd);
    // The data dir holds only this member's audit log (and the keyring by default); SQLite
    // would have made it, so make it here, 0700 as SQLite does.
    // (An existing one, such as a Kubernetes emptyDir, is left as it is.)
    std::error_code dir_ec;
    if (std::filesystem::create_directories(flags.data_dir, dir_ec))
      std::filesystem::permissions(flags.data_dir, std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::replace, dir_ec);
    if (dir_ec) {
      logger.error("cannot make the data dir", {{"path", flags.data_dir}, {"error", dir_ec.message()}});
      return 1;
    }
  } else {
    auto sqlite = SqliteBackend::open(flags.data_dir);
    if (!sqlite) {
      logger.error("cannot open state", {{"error", sqlite.error()}});
      return 1;
    }
    state_where = (*sqlite)->path().string();
    backend = std::move(*sqlite);
  }
  std::shared_ptr<const rpc::TransportSecurity> security;
  if (int refused = transport_security(flags, logger, security)) return refused;
  tls::PairPaths enrollment;
  if (int refused = enrollment_ca(flags, logger, enrollment)) return refused;

  // Secrets are sealed on their way to SQLite and opened on load (secrets/sealed_backend.hpp);
  // the keyring is written on the first start, before anything is sealed with it.
  const std::filesystem::path keyring_path = flags.keyring_file.empty()
                                                 ? std::filesystem::path(flags.data_dir) / "keyring"
                                                 : std::filesystem::path(flags.keyring_file);
  auto keyring = secrets::Keyring::load_or_new(keyring_path);
  if (!keyring) {
    logger.error("cannot open the keyring", {{"path", keyring_path.string()}, {"error", keyring.error()}});
    return 1;
  }
  secrets::SealedBackend sealed{*backend, std::move(*keyring)};
  asio::io_context io{1};
  // Every write passes the change feed on its way to SQLite, so the claim GC sees which
  // volumes changed without scanning them all.
  ChangeFeed feed{sealed};
  // Group commit: a wave of commits (GC steps, agent reports) shares one fsync; answers and
  // outgoing RPCs wait until what they depend on is durable (see state_store.hpp).
  StateOptions state_options{.group_commit = true};
  std::function<void(const std::string&)> store_broken;  // etcd: set below, once the election exists
  if (flags.state.starts_with("etcd://"))
    state_options.on_broken = [&store_broken](const std::string& why) { store_broken(why); };
  StateStore store{io.get_executor(), feed, state_options};
  // SQLite: loaded now; a state that does not load is fatal.
  //
  // With etcd the state is loaded only by the elected leader (ha/leader_election.hpp), at the
  // moment it is elected: a standby holds no state, forwards the REST API to the leader and
  // answers agents UNAVAILABLE naming it. Its backend refuses every write until it holds the
  // leader key, and then fences each one with it. etcd not answering (yet): the election waits
  // and says so ("waiting for etcd"), and readiness answers 503 with that reason meanwhile, so a
  // control plane started before its etcd, or during an outage, comes up by itself.
  const bool ha_mode = etcd_backend != nullptr;
  auto load_state = [&]() -> domain::Status {
    auto loaded = store.load();
    // The load held the backend's rows (the state's size again) beside the decoded state; give
    // the freed pages back, or RSS stays at the load's high-water mark (bench: footprint).
    ::malloc_trim(0);
    if (!loaded) return loaded;
    // Upgrade: namespaces in use before they were objects get their records, so none is stranded.
    if (auto adopt = namespaces::adopt_existing(store); !adopt.empty())
      if (auto index = store.commit(std::move(adopt)); !index)
        return domain::error("record the namespaces in use: " + index.error());
    logger.info("state loaded", {{"state", state_where},
                                 {"index", store.index()},
                                 {"volumes", store.volumes().size()},
                                 {"allocations", store.allocations().size()},
                                 {"keyring", keyring_path.string()},
                                 {"key_id", sealed.active_key_id()}});
    return {};
  };
  if (!ha_mode) {
    if (auto st = load_state(); !st) {
      logger.error("cannot load state",
                   {{"state", state_where}, {"keyring", keyring_path.string()}, {"error", st.error()}});
      return 1;
    }
  } else {
    etcd_backend->require_fence(
        [&io, argv](const std::string& why) { asio::post(io, [argv, why] { ha::restart_as_standby(argv, why); }); });
  }

  // HA: the election (etcd only). While etcd has not confirmed the leader's lease in time, writes
  // and calls out are held for up to one lease rather than refused (ha/lease_hold.hpp): etcd's own
  // raft election interrupts nothing. `refused_after_hold`: nullopt to go on (held while
  // unconfirmed, then confirmed), or why the call is refused (the hold ran out).
  std::unique_ptr<ha::Leadership> leadership;
  const std::function<asio::awaitable<std::optional<std::string>>()> refused_after_hold =
      [&]() -> asio::awaitable<std::optional<std::string>> {
    if (!leadership || co_await leadership->lease_hold().wait_while_unconfirmed()) co_return std::nullopt;
    co_return std::string(
        "etcd has no quorum or cannot be reached: it has not confirmed this leader's lease for a "
        "lease past its end; nothing was sent or changed");
  };

  // Node agents: controller calls (publish, unpublish, create, ...) and node detach go through them.
  // A call that finds a node's agent gone waits up to a heartbeat TTL for it to register again (by
  // then a silent node is marked down) and is resent to it (agentclient/agent_router.hpp).
  NodeRegistrations registrations;
  agentclient::AgentRouterOptions router_options;
  router_options.channel.security = security;
  router_options.hold = refused_after_hold;
  router_options.registrations = &registrations;
  router_options.reregistration_wait = flags.heartbeat_ttl;
  agentclient::AgentRouter router{io.get_executor(), store, router_options};
  agentclient::RouterPublisher publisher{router};
  gc::GcOptions gc_options;
  gc_options.backoff.max = flags.gc_retry_max;
  gc_options.backoff.initial = std::min(gc_options.backoff.initial, flags.gc_retry_max);
  gc_options.sweep_period = flags.gc_sweep_period;
  gc::ClaimGc claim_gc{io.get_executor(), store, feed, router, gc_options};
  gc::NodeLossMonitor node_loss{io.get_executor(), store};
  gc::AllocGcOptions alloc_gc_options;
  alloc_gc_options.threshold = flags.alloc_gc_threshold;
  gc::AllocGc alloc_gc{io.get_executor(), store, alloc_gc_options};
  gc::NodeGcOptions node_gc_options;
  node_gc_options.threshold = flags.node_gc_threshold;
  gc::NodeGc node_gc{io.get_executor(), store, node_gc_options};
  // System allocations: one copy per eligible node, failed copies replaced, rolling updates.
  scheduler::SystemReconciler system_reconciler{io.get_executor(), store, feed};
  volumes::RouterControllerCalls controller_calls{router};
  volumes::VolumeLifecycle volume_lifecycle{io.get_executor(), store, controller_calls,
                                            [&claim_gc](const std::string& id) { claim_gc.retry_now(id); }};

  // Who changed what: one line per write, REST and agent gRPC (audit/audit_log.hpp).
  auto audit_log = open_audit_log(flags);
  if (!audit_log) {
    logger.error("cannot open the audit log", {{"error", audit_log.error()}});
    return 1;
  }

  // Node liveness: heartbeats in memory, nodes marked down after the TTL (the leader's loop).
  NodeLiveness liveness{store, LivenessOptions{.ttl = flags.heartbeat_ttl, .hearing = [&leadership] {
                                                 return !leadership || leadership->election().lease_valid();
                                               }}};

  api::ApiOptions api_options;
  api_options.last_heard = [&liveness](const std::string& node_id) { return liveness.last_heard(node_id); };
  api_options.audit = audit_log->get();
  api_options.cors.read_origins = flags.cors_read_origins;
  api_options.cors.write_origins = flags.cors_write_origins;
  api_options.keyring = &sealed;
  api_options.acl = flags.acl;
  api_options.enrollment_ca = enrollment;
  api_options.node_cert_ttl = std::chrono::duration_cast<std::chrono::seconds>(flags.node_cert_ttl);
  api::Api api{store, volume_lifecycle, api_options};

  // High availability: the leader serves `api`; a standby answers the status routes and forwards
  // the rest (ha/front.hpp). `serving` turns true on the io thread once elected and loaded.
  auto serving = [&] { return !ha_mode || (leadership && leadership->serving()); };
  std::unique_ptr<ha::Forwarder> forwarder;
  std::unique_ptr<ha::Front> front;
  http::Handler api_handler = [&api](http::Request r) { return api.handle(std::move(r)); };
  if (ha_mode) {
    // The leader's REST certificate is checked against our CA; we present our own, by which the
    // leader knows a forward (and believes the caller it names). A leader that does not answer
    // within twice the lease has lost it by then: the client gets a 503 at once, not a minute later.
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
  http_config.refused = [&api](const http::Request& r, const http::Response& res) { api.record_refusal(r, res); };
  http::Server server{io.get_executor(), http_config,
                      [&](http::Request r) { return front ? front->handle(std::move(r)) : api_handler(std::move(r)); }};
  if (auto tls = server.reload_tls(); !tls) {
    logger.error("cannot serve HTTPS", {{"error", tls.error()}});
    return 1;
  }
  if (auto ec = server.listen()) {
    logger.error("cannot listen", {{"addr", flags.http_addr}, {"error", ec.message()}});
    return 1;
  }
  server.start();

  // Node agents' RPC service.
  AgentServiceOptions agent_options{
      .require_node_identity = security != nullptr,
      .audit = audit_log->get(),
      .registrations = &registrations,
      .renewal_ca = enrollment,
      .node_cert_ttl = std::chrono::duration_cast<std::chrono::seconds>(flags.node_cert_ttl)};
  if (ha_mode) {
    agent_options.standby = [&]() -> std::optional<std::string> {
      if (serving()) return std::nullopt;
      auto leader = leadership ? leadership->election().leader() : std::nullopt;
      return leader && !leadership->election().leading() ? leader->grpc_addr : std::string{};
    };
    agent_options.hold = refused_after_hold;
    agent_options.writes_refused = [&]() -> std::optional<std::string> {
      if (!leadership || !leadership->election().degraded()) return std::nullopt;
      return "etcd has no quorum or cannot be reached: this control plane (the leader) refuses every call until it "
             "answers again; nothing was changed";
    };
  }
  AgentService agent_service{io.get_executor(), store, liveness, &publisher, agent_options};
  std::string grpc_error;
  auto grpc_server = rpc::Server::start(
      rpc::ServerOptions{.address = flags.grpc_addr, .services = {agent_service.service()}, .security = security},
      grpc_error);
  if (!grpc_server) {
    logger.error("cannot listen", {{"addr", flags.grpc_addr}, {"error", grpc_error}});
    return 1;
  }
  logger.info("grpc api listening",
              {{"addr", flags.grpc_addr}, {"port", grpc_server->port()}, {"heartbeat_ttl", flags.heartbeat_ttl}});
  async::TaskGroup node_tasks{io.get_executor(), "nodes"};
  if (security) watch_certificates(node_tasks, server, security);
  // What only the leader runs: the same start after an election as after a restart.
  auto lead = [&] {
    node_tasks.spawn("liveness", [&liveness] { return liveness.run(); });
    claim_gc.start();  // resumes every release that was under way when we stopped
    node_loss.start();
    alloc_gc.start();
    node_gc.start();
    system_reconciler.start();  // resumes groups and rolling updates where the state left them
    volume_lifecycle.start();   // resumes deletes whose outcome was unknown when we stopped
    // The line scripts and tests wait for; it carries the bound port (useful with port 0).
    logger.info("http api listening", {{"addr", http_config.address},
                                       {"port", server.port()},
                                       {"scheme", server.secure() ? "https" : "http"},
                                       {"grpc_addr", flags.grpc_addr},
                                       {"acl", flags.acl ? "on" : "off"},
                                       {"role", ha_mode ? "leader" : "single"}});
  };
  if (!ha_mode) {
    lead();
  } else {
    auto channel = EtcdChannels::make(etcd_options);
    if (!channel) {
      logger.error("cannot reach etcd", {{"error", channel.error()}});
      return 1;
    }
    ha::ElectionOptions election_options{
        .etcd = *channel,
        .key = etcd_options.prefix + "/leader",
        .self = advertised(flags, server.secure(), server.port(), grpc_server->port()),
        .lease = flags.leader_lease,
        .campaign_delay = ha::campaign_delay(flags.leader_lease),
    };
    const std::string self_http = election_options.self.http_addr;
    leadership = std::make_unique<ha::Leadership>(
        ha::LeadershipParts{
            .executor = io.get_executor(),
            .argv = argv,
            .store = store,
            .backend = *etcd_backend,
            .tasks = node_tasks,
            .load_state = load_state,
            .lead = lead,
            .pause_calls = [&router](std::optional<std::string> why) { router.set_paused(std::move(why)); },
            .resumed =
                [&] {
                  // Their backoff grew while etcd could not be reached.
                  for (const auto& [key, v] : store.volumes()) claim_gc.retry_now(key);
                  liveness.grant_grace();  // heartbeats were refused meanwhile
                }},
        std::move(election_options));
    store_broken = [&leadership](const std::string& why) { leadership->store_broken(why); };
    front = std::make_unique<ha::Front>(leadership->election(), leadership->lease_hold(), *forwarder, api_handler,
                                        serving, flags.stale_reads_max, self_http);
    leadership->start();
    logger.info("standby until elected", {{"addr", http_config.address},
                                          {"port", server.port()},
                                          {"advertise_http_addr", self_http},
                                          {"state", state_where},
                                          {"leader_lease", flags.leader_lease}});
  }

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    logger.info("shutting down", {{"signal", signo}, {"grace", flags.shutdown_grace}});
    store.release_waiters();  // blocking queries answer now instead of holding the shutdown
    node_tasks.cancel();
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await claim_gc.stop();
          co_await node_loss.stop();
          co_await alloc_gc.stop();
          co_await node_gc.stop();
          co_await system_reconciler.stop();
          co_await volume_lifecycle.stop();
        },
        [&](std::exception_ptr e) {
          if (e) logger.error("background shutdown failed");
        });
    asio::co_spawn(io, grpc_server->shutdown(flags.shutdown_grace), [&](std::exception_ptr e) {
      if (e) logger.error("grpc shutdown failed");
    });
    asio::co_spawn(io, server.shutdown(flags.shutdown_grace), [&](std::exception_ptr e) {
      if (e) logger.error("http shutdown failed");
      if (leadership) leadership->election().stop();  // a leader hands over at once (its lease revoked)
      logger.info("stopped", {{"index", store.index()}});
    });
  });
  io.run();
  return 0;
}
