#include "services/controlplane/acl/secret.hpp"

#include "shared/tls/digest.hpp"

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

std::string secret_hash(std::string_view secret_id) { return tls::sha256_hex(secret_id); }

}  // namespace mooring::controlplane::acl
