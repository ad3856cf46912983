// State room: the answer to a write request that carried an Idempotency-Key header, kept so a
// client that lost the answer (connection reset, control plane restart) and sends the same
// request again gets the first answer instead of a second allocation. Kept in the replicated
// state like everything else, so a retry after a kill -9 or a failover is answered too.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "shared/domain/result.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

struct IdempotentRequest {
  std::string key;     // the client's Idempotency-Key
  std::string method;  // what the key was used for (named in the refusal of a reuse)
  std::string target;
  // "<key id>:<HMAC>" of method, target and body under the keyring (api.cpp); a reuse of the key
  // for another request is refused. A bare SHA-256 only without a keyring (in-process tests).
  std::string fingerprint;
  unsigned status = 0;  // the first answer
  std::string body;
  std::uint64_t answer_index = 0;  // its X-Mooring-Index (0: none)
  domain::Time time{};             // when it was answered: kept for kIdempotencyKeyTtl
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const IdempotentRequest&) const = default;
};

// How long an answer is kept for retries (Stripe's and the IETF draft's usual day).
inline constexpr auto kIdempotencyKeyTtl = std::chrono::hours(24);

// Hex SHA-256 of the request's method, target and body (the fingerprint without a keyring).
std::string request_fingerprint(std::string_view method, std::string_view target, std::string_view body);

std::string to_storage_text(const IdempotentRequest& r);
domain::Expected<IdempotentRequest> idempotent_request_from_storage(const std::string& text);

}  // namespace mooring::controlplane
