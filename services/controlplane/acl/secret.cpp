#include "services/controlplane/acl/secret.hpp"

#include "shared/domain/text.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <stdexcept>

namespace mooring::controlplane::acl {

namespace {
constexpr char kHex[] = "0123456789abcdef";
}

std::string random_uuid() {
  std::array<unsigned char, 16> b{};
  if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  std::string out;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[b[i] >> 4]);
    out.push_back(kHex[b[i] & 0xf]);
  }
  return out;
}

std::string secret_hash(std::string_view secret_id) {
  // Fetched once: EVP_sha256() with EVP_Digest looks the algorithm up in OpenSSL 3's provider
  // tables (under a lock) on every call, and every authenticated request hashes its token.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (sha256 == nullptr || EVP_Digest(secret_id.data(), secret_id.size(), digest, &length, sha256, nullptr) != 1)
    throw std::runtime_error("SHA-256 is not available from OpenSSL");
  return domain::to_hex({reinterpret_cast<const char*>(digest), length});
}

}  // namespace mooring::controlplane::acl
