// ACL room: a token. The AccessorID is public; the SecretID is the credential and is kept only as
// its SHA-256 (the store never holds it, no answer but the creating one carries it). Pure code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "shared/domain/result.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane::acl {

enum class TokenType { client, management };

struct Token {
  std::string accessor_id;
  std::string secret_hash;  // hex SHA-256 of the SecretID
  std::string name;
  TokenType type = TokenType::client;
  std::vector<std::string> policies;  // names; a policy deleted later simply grants nothing
  domain::Time create_time{};
  domain::Time expiration_time{};  // unset: never expires
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const Token&) const = default;
};

bool expired(const Token& t, domain::Time now);

// The body of PUT /v1/acl/token: Name, Type (client | management; default client), Policies
// (a client token needs at least one, a management token takes none), optional ExpirationTTL
// ("1h") or ExpirationTime (RFC 3339). Ids and times are the caller's to fill in.
domain::Expected<Token> parse_token_request(const nlohmann::json& body, domain::Time now);

// The API shape, without any secret. `secret_id` (the create and bootstrap answers only) adds
// SecretID.
nlohmann::json to_api_json(const Token& t, std::string_view secret_id = {});
std::string to_storage_text(const Token& t);
domain::Expected<Token> token_from_storage(const nlohmann::json& j);

}  // namespace mooring::controlplane::acl
