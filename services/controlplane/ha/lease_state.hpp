// HA room: the leader's lease as those that hold writes on it see it (lease_hold.hpp):
// LeaderElection, or a fake in tests. Every read is thread-safe.
#pragma once

#include <chrono>

namespace mooring::controlplane::ha {

class LeaseState {
 public:
  virtual ~LeaseState() = default;

  // True while this process holds the leader key as far as it knows (degraded included).
  virtual bool leading() const = 0;
  // Leading, not degraded, and the lease's deadline (by our clock) has not passed.
  virtual bool lease_valid() const = 0;
  // Until when a write or call out that finds the lease unconfirmed is held rather than refused.
  virtual std::chrono::steady_clock::time_point writes_held_until() const = 0;

  // Leading, and etcd has not confirmed the lease in time (held, then degraded).
  bool unconfirmed() const { return leading() && !lease_valid(); }
};

}  // namespace mooring::controlplane::ha
