// The control plane's start-up pieces that read the configuration: the REST server's settings,
// the TLS files checked before anything listens, the audit log's files, the address other
// control planes and agents reach this one at, and the certificate watch. control_plane.cpp
// wires them.
#pragma once

#include <cstdint>
#include <memory>

#include "services/controlplane/audit/audit_log.hpp"
#include "services/controlplane/config/controlplane_config.hpp"
#include "services/controlplane/ha/leader_election.hpp"
#include "services/controlplane/http/server.hpp"
#include "shared/async/task_group.hpp"
#include "shared/log/log.hpp"
#include "shared/rpc/transport_security.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::controlplane {

// The API keeps up to --http-max-connections sockets and gRPC and SQLite need descriptors too,
// while the soft limit is often 1024: take the hard limit, as Go's runtime does.
void raise_open_file_limit(const log::Logger& log);

http::ServerConfig http_server_config(const ControlPlaneConfig& flags);

// The agents' gRPC port: mutual TLS when the files are given (agents must present a certificate
// from the CA naming their node), plaintext only with --insecure. Returns the exit code when the
// control plane must not start (0: go on; `security` stays null for plaintext).
int transport_security(const ControlPlaneConfig& flags, const log::Logger& log,
                       std::shared_ptr<const rpc::TransportSecurity>& security);

// Node enrollment signs with the CA of --tls-ca-file and the key of --tls-ca-key-file: a key that
// is missing or does not match stops the start, rather than the first node's enrollment.
int enrollment_ca(const ControlPlaneConfig& flags, const log::Logger& log, tls::PairPaths& out);

domain::Expected<std::unique_ptr<audit::AuditLog>> open_audit_log(const ControlPlaneConfig& flags);

// gRPC picks renewed certificates up from the files; SIGHUP reloads the REST API's HTTPS (new
// connections use the new files), logs the certificate in use and re-checks expiry at once, and
// a daily check warns 30 days ahead.
void watch_certificates(async::TaskGroup& tasks, http::Server& server,
                        std::shared_ptr<const rpc::TransportSecurity> security, const log::Logger& log);

// Where other control planes and agents reach this one: the flags, else the listen addresses.
ha::LeaderRecord advertised(const ControlPlaneConfig& flags, bool https, std::uint16_t http_port, int grpc_port,
                            const log::Logger& log);

}  // namespace mooring::controlplane
