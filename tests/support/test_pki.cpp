#include "tests/support/test_pki.hpp"

#include <stdexcept>

#include "shared/tls/cert_files.hpp"

namespace mooring::test {

TestPki::TestPki(std::filesystem::path dir, const std::string& name) : dir_(std::move(dir)) {
  auto ca = tls::create_ca({.common_name = "Mooring CA " + name, .days = 30});
  if (!ca) throw std::runtime_error(ca.error());
  if (auto w = tls::write_pair(tls::ca_paths(dir_), *ca); !w) throw std::runtime_error(w.error());
}

TlsPaths TestPki::leaf(tls::Role role, const std::string& node_id) {
  const tls::Identity id{role, node_id};
  const auto paths = tls::pair_paths(dir_, id);
  const TlsPaths out{tls::ca_paths(dir_).cert.string(), paths.cert.string(), paths.key.string()};
  if (std::filesystem::exists(paths.cert)) return out;
  auto ca = tls::read_pair(tls::ca_paths(dir_));
  if (!ca) throw std::runtime_error(ca.error());
  auto cert = tls::create_certificate(*ca, {.identity = id, .validity = std::chrono::hours(24 * 30)});
  if (!cert) throw std::runtime_error(cert.error());
  if (auto w = tls::write_pair(paths, *cert); !w) throw std::runtime_error(w.error());
  return out;
}

std::string TestPki::read(const std::string& path) {
  auto text = tls::read_text(path);
  return text ? *text : std::string();
}

TlsPaths TestPki::server() { return leaf(tls::Role::server, {}); }
TlsPaths TestPki::agent(const std::string& node_id) { return leaf(tls::Role::agent, node_id); }
TlsPaths TestPki::cli() { return leaf(tls::Role::cli, {}); }

}  // namespace mooring::test
