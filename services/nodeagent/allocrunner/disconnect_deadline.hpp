// When an allocation with StopAfterClientDisconnect must stop on this node (issue 43): pure
// arithmetic, shared by the agent's own stop (AllocManager::check_disconnect) and the deadline a
// walled task's init keeps on its own when the agent is dead (process/keeper_page.hpp).
//
// The bound is the control plane's earliest free of the claims (gc/release_rules.cpp): at
// node_down_since + limit. node_down_since is the node's "node down" event (the liveness loop's
// mark, more than a TTL after it last heard the node) or the stored LastHeartbeat, whichever is
// later; the control plane heard this node no earlier than the agent SENT its last answered
// heartbeat (or registration). So the earliest free is sent + TTL + limit, and the task must be
// dead a margin before it.
#pragma once

#include <chrono>

#include "services/nodeagent/process/keeper_page.hpp"

namespace mooring::nodeagent {

// The last heartbeat (or registration) the control plane answered: when it was sent, and the
// heartbeat TTL the answer named.
struct Heard {
  std::chrono::steady_clock::time_point sent;
  std::chrono::milliseconds ttl{0};
};

// The init's wake-up lateness, the kill's own time and the clocks' drift fit in it.
inline constexpr std::chrono::milliseconds kDisconnectMargin{1000};

// SIGTERM once `limit` has passed since `heard.sent` (the allocation's own setting, counted from
// the send and not from the answer), SIGKILL after the kill timeout, cut short so that the kill
// comes `kDisconnectMargin` before the control plane's earliest free (sent + TTL + limit).
KeeperDeadline disconnect_deadline(const Heard& heard, std::chrono::milliseconds limit,
                                   std::chrono::milliseconds kill_timeout);

// The earliest time the control plane may free the claims of such an allocation.
std::chrono::steady_clock::time_point earliest_free(const Heard& heard, std::chrono::milliseconds limit);

}  // namespace mooring::nodeagent
