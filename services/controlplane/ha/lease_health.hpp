// HA room: what a leader knows about its own lease, as a pure state machine (no I/O, no clock of
// its own), so every transition is unit-tested; leader_election.cpp feeds it etcd's answers.
//
//   leading  --no renewal confirmed by the deadline + hold (etcd unreachable, no quorum)--> degraded
//   degraded --etcd answers: the lease is alive, then the key is still ours-------------> leading
//   any      --etcd answers: the lease is gone, or the key is gone or another's---------> lost (final)
//
// Between the deadline and the end of the hold the leader is *unconfirmed*: still leading, but
// lease_valid() is false, so writes and calls out wait rather than go (LeaderElection holds them)
// — etcd's own raft election (1-2 s) answers no renewal and is over before the hold is.
// Only an *answer* from etcd ends a leadership: silence may be etcd's quorum loss (then nobody
// else can be elected and our key and lease come back with the quorum) or our own partition (then
// a new leader may be elected elsewhere). A degraded leader cannot tell the two apart, so it
// refuses every write and serves reads marked stale (docs/high-availability.md); its fence
// (state/etcd/etcd_backend.hpp) would make any write fail anyway once the key is no longer its own.
#pragma once

#include <chrono>
#include <optional>

namespace mooring::controlplane::ha {

class LeaseHealth {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Role { leading, degraded, lost };
  // What the election must do after an input.
  enum class Next {
    nothing,    // carry on
    degrade,    // became degraded: refuse writes, pause background work, mark reads stale
    check_key,  // the lease is alive again: read the leader key, then key_checked()
    restore,    // the key is ours: lead again
    lose,       // step down
  };
  enum class Key { ours, gone, other, unanswered };

  // Elected: the lease was granted (or last renewed) by a request sent at `sent`, for `ttl`;
  // degraded only once `hold` has passed after the deadline with no renewal confirmed.
  LeaseHealth(Clock::time_point sent, std::chrono::seconds ttl, std::chrono::milliseconds hold = {});

  // etcd answered a renewal sent at `sent`: the lease has `ttl` left (<= 0: it is gone).
  Next renewed(Clock::time_point sent, std::chrono::seconds ttl);
  // A renewal got no answer (unreachable, timeout, no leader in etcd) by `now`.
  Next unanswered(Clock::time_point now);
  // What reading the leader key after a renewal answered in the degraded role found.
  Next key_checked(Key key);

  Role role() const { return role_; }
  // Writes are allowed only while leading and before our own deadline: the send time of the last
  // renewal etcd confirmed + its TTL, never later than etcd's own expiry.
  bool lease_valid(Clock::time_point now) const { return role_ == Role::leading && now < deadline_; }
  Clock::time_point deadline() const { return deadline_; }
  // Until when an unconfirmed lease holds writes instead of degrading: deadline() + hold.
  Clock::time_point held_until() const { return deadline_ + hold_; }
  // When etcd last confirmed that we lead (a renewal's send time): how stale a degraded read is.
  Clock::time_point last_confirmed() const { return last_confirmed_; }

 private:
  Role role_ = Role::leading;
  Clock::time_point deadline_;
  Clock::time_point last_confirmed_;
  std::chrono::milliseconds hold_;
  std::optional<std::pair<Clock::time_point, std::chrono::seconds>>
      alive_;  // degraded: renewal answered, key unchecked
};

}  // namespace mooring::controlplane::ha
