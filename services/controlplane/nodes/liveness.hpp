// Nodes room: node liveness. The time of each node's last heartbeat lives in memory only
// (persisting it would be a write per heartbeat); a loop marks a node down once it has missed
// heartbeats for the TTL. After a control plane restart nobody has heartbeated yet, so every
// node gets one TTL of grace, counted from the start of this process — or, for a standby, from
// its election (run() starts then): agents talk only to the leader, so a standby promoted after
// minutes up has heard from no node, and would otherwise mark every node down at once.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "shared/log/log.hpp"

namespace mooring::controlplane {

class StateStore;

struct LivenessOptions {
  std::chrono::milliseconds ttl{std::chrono::seconds(10)};
  // How often the loop looks; 0 = ttl/4, between 20 ms and 1 s.
  std::chrono::milliseconds check_period{0};
};

class NodeLiveness {
 public:
  using Clock = std::chrono::steady_clock;

  // Use on the store's executor only.
  NodeLiveness(StateStore& store, LivenessOptions options);

  std::chrono::milliseconds ttl() const { return options_.ttl; }

  // Every node gets one TTL of grace from `now` again, as after a start: a leader that could not
  // hear heartbeats (etcd without quorum: it refused them) leads again.
  void grant_grace(Clock::time_point now = Clock::now());

  // The node registered or heartbeated.
  void seen(const std::string& node_id, Clock::time_point at = Clock::now());

  // Marks down (one commit per node) every node not down whose last heartbeat — or the start of
  // this process, for nodes not heard from since — is more than a TTL before `now`. Returns the
  // ids marked down. A failed commit is logged and retried on the next check.
  std::vector<std::string> check(Clock::time_point now = Clock::now());

  // check() every period until the awaiting coroutine is cancelled (run it in a TaskGroup). The
  // grace of nodes not heard from yet starts now.
  boost::asio::awaitable<void> run();

 private:
  StateStore& store_;
  LivenessOptions options_;
  Clock::time_point started_;
  std::map<std::string, Clock::time_point> last_seen_;
  log::Logger log_{"liveness"};
};

}  // namespace mooring::controlplane
