// Test support: a real single-member etcd (Debian's etcd-server) on free loopback ports with its
// data in a test's directory. The destructor kills it, so a failing test leaks no process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"

namespace mooring::test {

// A loopback TCP port nobody listens on right now.
std::uint16_t free_tcp_port();

// Client TLS for etcd: its own certificate and key, and the CA a client's certificate must chain
// to (--client-cert-auth). Peers stay on plain HTTP between loopback members.
struct EtcdTls {
  std::string ca, cert, key;
};

class EtcdProcess {
 public:
  // Why etcd cannot run here (for GTEST_SKIP), or nullopt when /usr/bin/etcd is installed.
  static std::optional<std::string> unavailable();

  // `client_port` 0: a free one.
  explicit EtcdProcess(std::filesystem::path dir, std::uint16_t client_port = 0);
  // A member of a cluster (EtcdCluster): its name, its ports, and every member's "name=peer URL".
  EtcdProcess(std::filesystem::path dir, std::string name, std::uint16_t client_port, std::uint16_t peer_port,
              std::string initial_cluster, std::optional<EtcdTls> tls = std::nullopt);
  ~EtcdProcess();

  // Starts it (again, on the same ports and data after a kill) and waits until it serves
  // clients; throws std::runtime_error naming its log when it does not within 20 s.
  void start();
  // start() in two halves, for members that become ready only together.
  void spawn();
  void wait_ready();
  std::uint16_t peer_port() const { return peer_port_; }
  void kill();
  bool running() const;

  std::string endpoint() const;  // "127.0.0.1:<client port>"
  const std::filesystem::path& log_file() const { return log_; }

 private:
  std::filesystem::path dir_, log_;
  std::string name_ = "m1";
  std::uint16_t client_port_ = 0, peer_port_ = 0;
  std::string initial_cluster_;  // empty: a cluster of this one
  std::optional<EtcdTls> tls_;
  std::unique_ptr<ChildProcess> process_;
};

// A real etcd cluster of `members` on loopback (each its own free ports and data dir), for the
// quorum tests of the HA control plane. The destructor kills them all.
class EtcdCluster {
 public:
  // With `tls`, clients must come over TLS with a certificate from `tls->ca`.
  explicit EtcdCluster(std::filesystem::path dir, std::size_t members = 3, std::optional<EtcdTls> tls = std::nullopt);
  void start();                   // all, then waits until each serves clients
  void start(std::size_t i);      // one again (its data kept)
  void kill(std::size_t i);       // SIGKILL
  std::size_t size() const { return members_.size(); }
  // "etcd://127.0.0.1:A,127.0.0.1:B,127.0.0.1:C" + prefix
  std::string url(const std::string& prefix) const;
  EtcdProcess& member(std::size_t i) { return *members_.at(i); }

 private:
  std::vector<std::unique_ptr<EtcdProcess>> members_;
};

}  // namespace mooring::test
