#include "services/controlplane/control_plane_setup.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "services/controlplane/state/open_backend.hpp"
#include "shared/config/host_port.hpp"
#include "shared/domain/ids.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;

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
                .peer_ca_file = is_shared_state(flags.state) ? flags.tls_ca_file : std::string()};
  return config;
}

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

void watch_certificates(async::TaskGroup& tasks, http::Server& server,
                        std::shared_ptr<const rpc::TransportSecurity> security, const log::Logger& log) {
  tasks.spawn("tls-expiry", [security] { return rpc::warn_expiry_daily(security); });
  tasks.spawn("tls-sighup", [&server, security, log]() -> asio::awaitable<void> {
    asio::signal_set hup(co_await asio::this_coro::executor, SIGHUP);
    for (;;) {
      co_await hup.async_wait(asio::use_awaitable);
      if (auto tls = server.reload_tls(); !tls)
        log.error("HTTPS reload failed; the old files stay in use", {{"error", tls.error()}});
      rpc::log_certificate_status(*security);
    }
  });
}

ha::LeaderRecord advertised(const ControlPlaneConfig& flags, bool https, std::uint16_t http_port, int grpc_port,
                            const log::Logger& log) {
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
    log.warn(
        "listening on 0.0.0.0: give --advertise-http-addr and --advertise-grpc-addr, or standbys and agents "
        "cannot reach this control plane when it leads",
        {{"http_addr", self.http_addr}, {"grpc_addr", self.grpc_addr}});
  return self;
}

}  // namespace mooring::controlplane
