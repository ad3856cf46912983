#include "services/nodeagent/allocrunner/disconnect_deadline.hpp"

#include <algorithm>

namespace mooring::nodeagent {

using std::chrono::milliseconds;

std::chrono::steady_clock::time_point earliest_free(const Heard& heard, milliseconds limit) {
  return heard.sent + heard.ttl + limit;
}

KeeperDeadline disconnect_deadline(const Heard& heard, milliseconds limit, milliseconds kill_timeout) {
  const auto term_at = heard.sent + limit;
  const auto room = std::max(milliseconds(0), heard.ttl - kDisconnectMargin);
  return {term_at, term_at + std::min(std::max(kill_timeout, milliseconds(0)), room)};
}

}  // namespace mooring::nodeagent
