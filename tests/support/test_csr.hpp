// Test support: certificate signing requests shared/tls would never make (another key type,
// extra SANs, a broken signature), built with OpenSSL directly, so the enrollment checks can be
// fed what an attacker or a misconfigured node might send.
#pragma once

#include <string>
#include <vector>

namespace mooring::test {

struct CsrSpec {
  enum class KeyType { p256, p384, rsa2048 } key = KeyType::p256;
  std::vector<std::string> uris;
  std::vector<std::string> dns_names;
  std::vector<std::string> emails;
  bool break_signature = false;  // flip a bit of the signature after signing
};

// The CSR's PEM; the key is thrown away.
std::string make_csr(const CsrSpec& spec);

}  // namespace mooring::test
