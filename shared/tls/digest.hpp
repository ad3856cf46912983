// SHA-256 of a byte string as lower-case hex (OpenSSL EVP): token hashes in the control plane,
// the secrets digest in mooring-hostpath's call log. No cryptography of our own.
#pragma once

#include <string>
#include <string_view>

namespace mooring::tls {

// Throws std::runtime_error only if OpenSSL has no SHA-256 (a broken install, not an input error).
std::string sha256_hex(std::string_view data);

}  // namespace mooring::tls
