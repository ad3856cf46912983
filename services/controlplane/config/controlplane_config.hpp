// The control plane's configuration: a JSON file (--config / MOORING_CP_CONFIG), MOORING_CP_*
// environment variables and flags, merged with flags winning over the environment winning over
// the file. Parsing is pure (no I/O besides reading the named file), so it is unit-tested directly.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "shared/log/log.hpp"

namespace mooring::controlplane {

struct ControlPlaneConfig {
  std::string config_file;
  std::string data_dir;      // required
  std::string keyring_file;  // empty: <data_dir>/keyring
  // Where the state lives: empty (or "sqlite://<dir>/state.db") for the embedded SQLite under
  // data_dir; "etcd://host:port[,host:port...][/prefix]" for etcd (TLS with the etcd_* files).
  std::string state;
  std::string etcd_ca_file, etcd_cert_file, etcd_key_file;
  // High availability (etcd state only): the leader holds an etcd lease this long (etcd grants whole
  // seconds, at least its own minimum, 2 s by default); the addresses this control plane is reached
  // at, stored in the leader key so standbys forward there and agents follow it. Empty: derived
  // from http_addr/grpc_addr (scheme from the TLS files).
  std::chrono::milliseconds leader_lease{2'000};
  // A leader cut off from a quorum of etcd is *degraded*: it refuses writes and serves reads from
  // memory, marked stale, for at most this long (0: none); see docs/high-availability.md.
  std::chrono::milliseconds stale_reads_max{std::chrono::minutes(5)};
  std::string advertise_http_addr;
  std::string advertise_grpc_addr;
  std::string http_addr = "127.0.0.1:4700";
  std::string grpc_addr = "127.0.0.1:4701";
  // REST API connection limits (defaults and their reasons: http::ServerConfig).
  std::size_t http_max_connections = 1024;
  std::size_t http_max_connections_per_client = 256;
  bool acl = true;      // ACL tokens and policies on the REST API; --acl=false opens it
  bool metrics = true;  // Prometheus metrics at GET /v1/metrics; --metrics=off records nothing
  log::Level log_level = log::Level::info;
  log::Format log_format = log::Format::text;
  std::vector<std::string> cors_read_origins;   // empty: no foreign origin may read
  std::vector<std::string> cors_write_origins;  // empty: no origin may write
  std::chrono::milliseconds shutdown_grace{10'000};
  std::chrono::milliseconds heartbeat_ttl{10'000};
  std::size_t max_heartbeats_per_second = 1000;  // beyond it the fleet is paced (nodes/liveness.hpp)
  std::chrono::milliseconds gc_retry_max{30'000};
  std::chrono::milliseconds gc_sweep_period{300'000};
  std::chrono::milliseconds alloc_gc_threshold{3'600'000};
  std::chrono::milliseconds node_gc_threshold{24 * 3'600'000};
  // Mutual TLS on the gRPC port (all three, or none): the CA that signs agents' certificates, and
  // the control plane's own certificate and key (`mooring tls cert create -server`).
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // The key of tls_ca_file, for node enrollment (signing nodes' CSRs); optional.
  std::string tls_ca_key_file;
  // How long node certificates signed by enrollment and renewal last (Nomad's node identities
  // last a day, kubelet's a year; a week lets an agent ride out a long control plane outage).
  std::chrono::milliseconds node_cert_ttl{7 * 24 * 3'600'000};
  // With the TLS files, the REST API serves HTTPS with the same certificate; this CA makes REST
  // clients present certificates too.
  std::string http_client_ca_file;
  std::string audit_log;  // a second audit log besides <data-dir>/audit.log
  bool insecure = false;  // plaintext gRPC on purpose (no warning about missing TLS files)
};

struct ControlPlaneArgs {
  bool help = false;
  bool help_markdown = false;  // --help-markdown: print docs/configuration/controlplane.md
  ControlPlaneConfig config;
};

struct ControlPlaneConfigError {
  std::string message;  // names the flag, variable or key and the bad value
};

// argv[0] is skipped; `env` holds the process environment (only MOORING_CP_* is read).
std::variant<ControlPlaneArgs, ControlPlaneConfigError> parse_controlplane_config(
    const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);

// --help: every flag with its environment variable, file key and default.
std::string controlplane_config_help();
// --help-markdown: the same table as the reference page docs/configuration/controlplane.md.
std::string controlplane_config_markdown();

}  // namespace mooring::controlplane
