// Secrets room: sealing a string with AES-256-GCM (OpenSSL EVP; no cryptography of our own).
// A sealed value is text, so it can sit in a storage JSON row:
//   "mooring-sealed:v1:<key id>:<base64(12-byte nonce | ciphertext | 16-byte tag)>"
// The nonce is fresh and random for every seal. The associated data (not stored) binds the value
// to where it belongs (table, row key, field): moved to another row it no longer opens.
#pragma once

#include <string>
#include <string_view>

#include "services/controlplane/secrets/keyring.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane::secrets {

inline constexpr std::string_view kSealedPrefix = "mooring-sealed:v1:";

bool is_sealed(std::string_view text);
// The key id a sealed value names ("" when it is not one).
std::string sealed_key_id(std::string_view text);

domain::Expected<std::string> seal(const Key& key, std::string_view plaintext, std::string_view associated_data);
// Errors say why without any of the plaintext: malformed, unknown key id (naming the keyring
// file), or authentication failed (tampered, moved, or another key with the same id).
domain::Expected<std::string> open_sealed(const Keyring& keyring, std::string_view sealed,
                                          std::string_view associated_data);

// `n` random bytes from OpenSSL's CSPRNG.
domain::Expected<std::string> random_bytes(std::size_t n);
std::string base64_encode(std::string_view bytes);
domain::Expected<std::string> base64_decode(std::string_view text);

}  // namespace mooring::controlplane::secrets
