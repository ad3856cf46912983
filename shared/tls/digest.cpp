#include "shared/tls/digest.hpp"

#include <openssl/evp.h>

#include <stdexcept>

#include "shared/domain/text.hpp"

namespace mooring::tls {

std::string sha256_hex(std::string_view data) {
  // Fetched once: EVP_sha256() with EVP_Digest looks the algorithm up in OpenSSL 3's provider
  // tables (under a lock) on every call, and every authenticated request hashes its token.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (sha256 == nullptr || EVP_Digest(data.data(), data.size(), digest, &length, sha256, nullptr) != 1)
    throw std::runtime_error("SHA-256 is not available from OpenSSL");
  return domain::to_hex({reinterpret_cast<const char*>(digest), length});
}

}  // namespace mooring::tls
