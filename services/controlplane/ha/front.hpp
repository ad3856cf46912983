// HA room: what every control plane of an etcd cluster answers on its REST port. The leader serves
// the API; a standby answers the status routes itself and forwards everything else to the leader
// (forwarder.hpp). Every answer says who gave it in X-Mooring-Leader (the leader's HTTP address).
//   GET /v1/status/leader  every member: the leader's HTTP address as a JSON string (Nomad's shape),
//                          503 naming the reason when there is none (no quorum, etcd down)
//   GET /v1/status/ready   200 only on the leader once its state is loaded (a Kubernetes Service
//                          with this readiness probe routes to the leader); 503 with the reason
//                          elsewhere: standby (naming the leader), waiting for etcd, loading
// A forward the leader does not answer in time (paused, cut off) is a 503 naming it, and the
// standby reads the leader key again at once, so the next request goes to the new leader.
// The leader takes a forwarded request's caller (X-Mooring-Forwarded-For/-By) from a peer that
// presented a control plane certificate only, so its audit log names the client "via" the
// standby; from anyone else those headers are dropped.
// A leader whose lease etcd has not confirmed in time holds a write (up to one lease past the
// lease's deadline, lease_hold.hpp) until etcd confirms it: etcd's own raft
// election (1-2 s) interrupts no client; reads meanwhile are answered from memory marked stale,
// as a degraded leader's. After that a *degraded*
// leader (etcd has no quorum or cannot be reached; leader_election.hpp) answers every
// write 503 at once without touching anything, serves reads from memory for up to
// `stale_reads_max` with `X-Mooring-Stale: <whole seconds since etcd last confirmed its lease>`
// (it cannot prove it still leads: a new leader may be elected elsewhere), and is not ready.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "services/controlplane/http/server.hpp"

namespace mooring::controlplane::ha {

class LeaderElection;
class LeaseHold;
class Forwarder;

class Front {
 public:
  // `api`: the full API (the leader's); `serving`: true once this process leads and has loaded
  // the state, read on the server's executor; `hold`: where a write waits while the lease is
  // unconfirmed. `self`: this control plane's advertised HTTP address (named as "via" when it
  // forwards).
  Front(LeaderElection& election, LeaseHold& hold, Forwarder& forwarder, http::Handler api,
        std::function<bool()> serving, std::chrono::milliseconds stale_reads_max, std::string self = {})
      : election_(election),
        hold_(hold),
        forwarder_(forwarder),
        api_(std::move(api)),
        serving_(std::move(serving)),
        stale_reads_max_(stale_reads_max),
        self_(std::move(self)) {}

  boost::asio::awaitable<http::Response> handle(http::Request request);

 private:
  std::string not_serving_reason() const;
  boost::asio::awaitable<http::Response> degraded(http::Request request);
  LeaderElection& election_;
  LeaseHold& hold_;
  Forwarder& forwarder_;
  http::Handler api_;
  std::function<bool()> serving_;
  std::chrono::milliseconds stale_reads_max_;
  std::string self_;
};

}  // namespace mooring::controlplane::ha
