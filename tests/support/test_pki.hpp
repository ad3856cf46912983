// Test support: throwaway certificates made with the openssl command (Debian's `openssl`): a CA,
// certificates it signs for a server (SAN localhost, 127.0.0.1 unless told otherwise) and a
// client, and a second, unrelated CA. ECDSA P-256, valid for a day.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mooring::test {

struct CertFiles {
  std::filesystem::path cert;
  std::filesystem::path key;
};

class TestPki {
 public:
  // Creates the CA (and the unrelated one) under `dir`. Throws std::runtime_error naming the
  // command when openssl fails or is missing.
  explicit TestPki(std::filesystem::path dir);

  const std::filesystem::path& ca() const { return ca_.cert; }
  const std::filesystem::path& other_ca() const { return other_.cert; }

  // A leaf certificate signed by the CA (or, with `by_other`, by the unrelated CA). `sans` like
  // "DNS:localhost", "IP:127.0.0.1", "URI:spiffe://…".
  CertFiles issue(const std::string& name, const std::vector<std::string>& sans = {"DNS:localhost", "IP:127.0.0.1"},
                  bool by_other = false) const;

 private:
  CertFiles make_ca(const std::string& name) const;
  std::filesystem::path dir_;
  CertFiles ca_;
  CertFiles other_;
};

}  // namespace mooring::test
