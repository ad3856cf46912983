#include "services/controlplane/ha/lease_health.hpp"

namespace mooring::controlplane::ha {

LeaseHealth::LeaseHealth(Clock::time_point sent, std::chrono::seconds ttl, std::chrono::milliseconds hold)
    : deadline_(sent + ttl), last_confirmed_(sent), hold_(hold) {}

LeaseHealth::Next LeaseHealth::renewed(Clock::time_point sent, std::chrono::seconds ttl) {
  if (role_ == Role::lost) return Next::nothing;
  if (ttl.count() <= 0) {
    role_ = Role::lost;
    return Next::lose;
  }
  if (role_ == Role::degraded) {
    // The lease outlived the outage (etcd extends every lease when its new raft leader takes
    // over); whether the key is still ours is asked before anything is written again.
    alive_ = std::pair{sent, ttl};
    return Next::check_key;
  }
  deadline_ = sent + ttl;
  last_confirmed_ = sent;
  return Next::nothing;
}

LeaseHealth::Next LeaseHealth::unanswered(Clock::time_point now) {
  if (role_ != Role::leading || now < held_until()) return Next::nothing;
  role_ = Role::degraded;
  return Next::degrade;
}

LeaseHealth::Next LeaseHealth::key_checked(Key key) {
  if (role_ != Role::degraded || !alive_) return Next::nothing;
  const auto alive = *alive_;
  alive_.reset();
  switch (key) {
    case Key::unanswered: return Next::nothing;  // etcd went away again: stay degraded, ask on the next renewal
    case Key::gone:
    case Key::other: role_ = Role::lost; return Next::lose;
    case Key::ours: break;
  }
  role_ = Role::leading;
  deadline_ = alive.first + alive.second;
  last_confirmed_ = alive.first;
  return Next::restore;
}

}  // namespace mooring::controlplane::ha
