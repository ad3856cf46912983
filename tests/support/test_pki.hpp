// Test support: a CA with server, agent and cli certificates in a directory, made with shared/tls
// as `mooring tls` makes them, for tests that run services or gRPC over mutual TLS.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "shared/tls/identity.hpp"

namespace mooring::test {

struct TlsPaths {
  std::string ca;
  std::string cert;
  std::string key;
};

class TestPki {
 public:
  // Writes <dir>/ca.pem and ca-key.pem; `name` tells CAs apart in subjects ("Mooring CA <name>").
  explicit TestPki(std::filesystem::path dir, const std::string& name = "test");

  TlsPaths server();                            // server.pem (made on first use)
  TlsPaths agent(const std::string& node_id);  // agent-<id>.pem
  TlsPaths cli();                               // cli.pem

  const std::filesystem::path& dir() const { return dir_; }
  // A file's content ("" when unreadable).
  static std::string read(const std::string& path);

 private:
  TlsPaths leaf(tls::Role role, const std::string& node_id);
  std::filesystem::path dir_;
};

}  // namespace mooring::test
