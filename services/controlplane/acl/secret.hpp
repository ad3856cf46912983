// ACL room: random ids and the hash a SecretID is kept as. OpenSSL's RAND_bytes and EVP SHA-256;
// no cryptography of our own.
#pragma once

#include <string>
#include <string_view>

namespace mooring::controlplane::acl {

// A random UUID (version 4 layout, 122 random bits) from RAND_bytes: AccessorIDs and SecretIDs.
std::string random_uuid();
// Hex SHA-256 of a SecretID: what the store keeps and looks tokens up by.
std::string secret_hash(std::string_view secret_id);

}  // namespace mooring::controlplane::acl
