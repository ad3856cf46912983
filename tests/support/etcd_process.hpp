// Test support: a real single-member etcd (Debian's etcd-server) on free loopback ports with its
// data in a test's directory. The destructor kills it, so a failing test leaks no process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "tests/support/child_process.hpp"

namespace mooring::test {

// A loopback TCP port nobody listens on right now.
std::uint16_t free_tcp_port();

class EtcdProcess {
 public:
  // Why etcd cannot run here (for GTEST_SKIP), or nullopt when /usr/bin/etcd is installed.
  static std::optional<std::string> unavailable();

  // `client_port` 0: a free one.
  explicit EtcdProcess(std::filesystem::path dir, std::uint16_t client_port = 0);
  ~EtcdProcess();

  // Starts it (again, on the same ports and data after a kill) and waits until it serves
  // clients; throws std::runtime_error naming its log when it does not within 20 s.
  void start();
  void kill();
  bool running() const;

  std::string endpoint() const;  // "127.0.0.1:<client port>"
  const std::filesystem::path& log_file() const { return log_; }

 private:
  std::filesystem::path dir_, log_;
  std::uint16_t client_port_ = 0, peer_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace mooring::test
