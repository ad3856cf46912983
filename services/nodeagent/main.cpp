// mooring-nodeagent: wiring only. Parses the configuration, resolves the node id, runs the agent
// on one io_context thread and shuts it down gracefully on SIGTERM/SIGINT.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "services/nodeagent/agent.hpp"
#include "services/nodeagent/config/agent_config.hpp"
#include "services/nodeagent/config/node_identity.hpp"
#include "services/nodeagent/metrics/agent_gauges.hpp"
#include "services/nodeagent/metrics/metrics_listener.hpp"
#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/volumes/volume_manager.hpp"
#include "shared/metrics/families.hpp"
#include "shared/config/settings.hpp"
#include "shared/durable/instance_lock.hpp"
#include "shared/log/async_writer.hpp"
#include "shared/log/log.hpp"
#include "shared/process/process_hygiene.hpp"
#include "shared/rpc/transport_security.hpp"
#include "shared/tls/cert_files.hpp"
#include "shared/tls/pair_replacement.hpp"

namespace {

namespace asio = boost::asio;
using namespace mooring;

// With mutual TLS, SIGHUP logs the certificate in use and its expiry (gRPC re-reads changed files
// on its own); otherwise SIGHUP keeps its default action. `signals` exists from the start of main:
// a SIGTERM during start-up is queued and answered with a graceful shutdown, never the default
// action killing the agent half-started. Returns the exit code.
asio::awaitable<int> run_agent(nodeagent::Agent& agent, asio::signal_set& signals,
                               std::shared_ptr<const rpc::TransportSecurity> security,
                               nodeagent::MetricsListener* metrics) {
  if (security) signals.add(SIGHUP);
  if (auto error = agent.start(); !error.empty()) {
    log::Logger("main").error("refusing to start", {{"error", error}});
    std::cerr << "mooring-nodeagent: " << error << "\n";
    if (metrics) co_await metrics->stop();
    co_return 1;
  }
  int sig = 0;
  for (;;) {
    sig = co_await signals.async_wait(asio::use_awaitable);
    if (sig != SIGHUP) break;
    rpc::log_certificate_status(*security);
  }
  log::Logger("main").info("signal received; shutting down", {{"signal", sig}});
  co_await agent.shutdown();
  if (metrics) co_await metrics->stop();
  co_return 0;
}

// With mutual TLS the certificate names the node: it is the id unless --node-id is given, and
// then they must agree (the control plane refuses calls for any other node). Returns 0, or the
// exit code when the agent must not start.
int load_security(nodeagent::AgentConfig& cfg, const log::Logger& log,
                  std::shared_ptr<const rpc::TransportSecurity>& security) {
  if (!cfg.tls_cert_file.empty()) {
    // A renewal cut short by a crash between its two renames left a new key with the old
    // certificate: the new one is beside it.
    if (auto recovered = tls::recover_pair({cfg.tls_cert_file, cfg.tls_key_file}); !recovered) {
      log.error("cannot use the TLS files", {{"error", recovered.error()}});
      return 1;
    }
    auto pem = tls::read_text(cfg.tls_cert_file);
    auto info = pem ? tls::inspect(*pem) : tls::Expected<tls::CertificateInfo>(domain::error(pem.error()));
    if (!info || !info->identity || info->identity->role != tls::Role::agent) {
      const std::string why =
          !info ? info.error() : "it is not a node agent's certificate (mooring tls cert create -agent)";
      log.error("cannot use the TLS certificate", {{"file", cfg.tls_cert_file}, {"error", why}});
      return 1;
    }
    if (cfg.node_id.empty()) cfg.node_id = info->identity->node_id;
    auto loaded = rpc::TransportSecurity::load({cfg.tls_ca_file, cfg.tls_cert_file, cfg.tls_key_file},
                                               tls::Identity{tls::Role::agent, cfg.node_id});
    if (!loaded) {
      log.error("cannot use the TLS files", {{"node_id", cfg.node_id}, {"error", loaded.error()}});
      return 1;
    }
    security = *loaded;
    rpc::log_certificate_status(*security);
  } else if (cfg.insecure) {
    log.warn("--insecure: gRPC with the control plane is plaintext; anyone who reaches the agent's port can call it");
  } else {
    log.error(
        "refusing to run plaintext: give --tls-ca-file, --tls-cert-file and --tls-key-file (make them with "
        "`mooring tls cert create -agent`), or --insecure to accept that anyone who reaches the agent's port "
        "can call it");
    return 2;
  }
  return 0;
}

// The node id (kept in the data dir when no certificate or flag names it) and the node name (the
// host name by default). False when the id can be neither read nor created.
bool resolve_node(nodeagent::AgentConfig& cfg, const log::Logger& log) {
  if (cfg.node_id.empty()) {
    std::error_code ec;
    cfg.node_id = nodeagent::load_or_create_node_id(cfg.data_dir, ec);
    if (ec) {
      log.error("cannot read or create the node id", {{"data_dir", cfg.data_dir}, {"error", ec.message()}});
      return false;
    }
  }
  if (cfg.node_name.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    cfg.node_name = host;
  }
  return true;
}

// Builds the agent and its metrics listener, runs them until a signal, and returns the exit code.
int serve(asio::io_context& io, asio::signal_set& signals, const nodeagent::AgentConfig& cfg,
          std::shared_ptr<const rpc::TransportSecurity> security, const log::Logger& log) {
  int rc = 0;
  nodeagent::AgentOptions options;
  options.security = security;
  nodeagent::Agent agent(io.get_executor(), cfg, std::move(options));
  std::unique_ptr<nodeagent::MetricsListener> metrics_http;
  if (auto* families = metrics::families()) {
    auto gauges = [&agent, node_id = cfg.node_id] {
      return nodeagent::agent_gauges(node_id, agent.status().fingerprints(), agent.volumes().pending_unmounts());
    };
    metrics_http = std::make_unique<nodeagent::MetricsListener>(
        io.get_executor(), families->registry, gauges,
        nodeagent::MetricsListenerOptions{cfg.metrics_addr, cfg.tls_ca_file, cfg.tls_cert_file, cfg.tls_key_file});
    if (auto err = metrics_http->start(); !err.empty()) {
      log.error("cannot serve metrics", {{"error", err}});
      std::cerr << "mooring-nodeagent: " << err << " (--metrics=off turns metrics off)\n";
      return 1;
    }
    log.info("serving metrics", {{"address", cfg.metrics_addr},
                                 {"port", static_cast<int64_t>(metrics_http->port())},
                                 {"https", metrics_http->secure()}});
  }
  asio::co_spawn(io, run_agent(agent, signals, security, metrics_http.get()), [&](std::exception_ptr e, int code) {
    rc = code;
    // An agent that refused to start ran nothing that needs winding down: whatever its
    // constructor armed must not keep io.run() going.
    if (code != 0) io.stop();
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log.error("agent failed", {{"error", ex.what()}});
    }
    rc = 1;
  });
  io.run();
  log.info("stopped");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // Neither a plugin closing a pipe on the agent nor a dead reader of the agent's own output
  // (run-local's tee after Ctrl-C) may kill it by SIGPIPE.
  process::survive_closed_pipes();
  process::skip_mutex_deadlock_detection();  // Debian's debug Abseil checks every lock gRPC takes
  asio::io_context io;
  asio::signal_set signals(io, SIGTERM, SIGINT);
  std::vector<std::string> args(argv, argv + argc);
  auto parsed = nodeagent::parse_agent_config(args, config::environment("MOORING_"));
  if (auto* err = std::get_if<nodeagent::ConfigError>(&parsed)) {
    std::cerr << "mooring-nodeagent: " << err->message << "\n";
    return 2;
  }
  auto& p = std::get<nodeagent::ParsedArgs>(parsed);
  if (p.help) {
    std::cout << nodeagent::agent_config_help();
    return 0;
  }
  if (p.help_markdown) {
    std::cout << nodeagent::agent_config_markdown();
    return 0;
  }
  auto& cfg = p.config;
  log::Level level{};
  log::Format format{};
  log::parse_level(cfg.log_level, level);
  log::parse_format(cfg.log_format, format);
  log::configure(level, format);
  // Lines are written by a thread of their own: the io_context thread runs every allocation's
  // steps, and ~20 synchronous write(2)s per lifecycle queued them (issue 21). Destroyed last,
  // after writing every queued line.
  log::AsyncWriter log_writer;
  log::Logger log{"main"};

  // One agent per data dir: a second one would re-adopt the same tasks, launch the same plugins
  // and answer for the same node. Held until the process ends (the kernel drops it on kill -9).
  auto lock = durable::InstanceLock::acquire(std::filesystem::path(cfg.data_dir) / "lock",
                                             "a node agent of data dir " + cfg.data_dir);
  if (!lock) {
    log.error("refusing to start", {{"error", lock.error()}});
    std::cerr << "mooring-nodeagent: " << lock.error() << "\n";
    return 1;
  }
  std::shared_ptr<const rpc::TransportSecurity> security;
  if (int code = load_security(cfg, log, security); code != 0) return code;
  if (!resolve_node(cfg, log)) return 1;
  log.info("starting mooring-nodeagent", {{"node_id", cfg.node_id},
                                          {"node_name", cfg.node_name},
                                          {"data_dir", cfg.data_dir},
                                          {"controlplane", cfg.controlplane_addr},
                                          {"plugins", static_cast<int64_t>(cfg.plugins.size())}});

  // Before the agent is built: its components take their metric handles when constructed.
  if (cfg.metrics) metrics::enable(metrics::Service::nodeagent);
  return serve(io, signals, cfg, security, log);
}
