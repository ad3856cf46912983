// Nodes room: node liveness. The time of each node's last heartbeat lives in memory only
// (persisting it would be a write per heartbeat); a loop marks a node down once it has missed
// heartbeats for the TTL. After a control plane restart nobody has heartbeated yet, so every
// node gets one TTL of grace, counted from the start of this process — or, for a standby, from
// its election (run() starts then): agents talk only to the leader, so a standby promoted after
// minutes up has heard from no node, and would otherwise mark every node down at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane {

class StateStore;

struct LivenessOptions {
  std::chrono::milliseconds ttl{std::chrono::seconds(10)};
  // The heartbeats per second the whole fleet may send (0: no limit). Agents heartbeat at a
  // third of the TTL; once the nodes are more than that allows, each is asked to heartbeat only
  // every nodes / budget, and the TTL becomes three of those intervals (heartbeat_pace).
  std::size_t max_heartbeats_per_second = 0;
  // How often the loop looks; 0 = default_check_period(ttl).
  std::chrono::milliseconds check_period{0};
  // HA: false while this leader cannot hear its nodes (etcd has not confirmed its lease: their
  // heartbeats are held or refused, ha/front.hpp). check() marks nobody down then, and every node
  // gets one TTL of grace when it hears again: a node is not lost to etcd's own raft election.
  std::function<bool()> hearing;
};

// What a RegisterNode or Heartbeat answer tells the agent.
struct HeartbeatPace {
  std::chrono::milliseconds ttl;           // silent longer than this, the node is marked down
  std::chrono::milliseconds min_interval;  // heartbeat no more often than this (0: at the agent's pace)
  bool operator==(const HeartbeatPace&) const = default;
};

// The pace of a fleet of `nodes`: the configured TTL while the fleet's heartbeats (one per node
// every TTL / 3) fit the budget; past that, one heartbeat per node every nodes / budget and a TTL
// of three such intervals, so that a node may miss two heartbeats, as at the configured TTL.
// Nomad does the same with 50 heartbeats/s and a 10 s floor (10,000 nodes: a 200 s TTL).
HeartbeatPace heartbeat_pace(std::size_t nodes, const LivenessOptions& options);

// A twentieth of the TTL, between 20 ms and 500 ms: a silent node is down within TTL + half a
// second (at 10,000 simulated nodes the look over every node costs a few ms; bench/node_fleet.cpp
// measured detection at TTL + 0.1..1.15 s with the 1 s period before).
std::chrono::milliseconds default_check_period(std::chrono::milliseconds ttl);

class NodeLiveness {
 public:
  using Clock = std::chrono::steady_clock;

  // Use on the store's executor only.
  NodeLiveness(StateStore& store, LivenessOptions options);

  // The pace to answer with now (heartbeat_pace over every node of the state). A node is judged
  // by the TTL it was last told.
  HeartbeatPace pace() const;

  // Every node gets one TTL of grace from `now` again, as after a start: a leader that could not
  // hear heartbeats (etcd without quorum: it refused them) leads again.
  void grant_grace(Clock::time_point now = Clock::now());

  // The node registered or heartbeated; the pace to answer it with, which its TTL is now.
  HeartbeatPace seen(const std::string& node_id, Clock::time_point at = Clock::now());
  // A heartbeat arrived (seen) and its answer waits for its report to be durable; answered():
  // the agent has its answer now (seen again). A node waiting for our answer is not silent: the
  // agent sends its next heartbeat only after it, and a commit held up by etcd (its own raft
  // election: 1-2 s) must not make it look lost. answered() without arrived() does nothing.
  HeartbeatPace arrived(const std::string& node_id, Clock::time_point at = Clock::now());
  void answered(const std::string& node_id, Clock::time_point at = Clock::now());

  // When this process last heard from the node, as a wall-clock time; none if it has not since it
  // started leading. The stored `LastHeartbeat` moves only with a commit (registration, a change
  // the heartbeat reported), so the API shows this one when it is later.
  std::optional<domain::Time> last_heard(const std::string& node_id, Clock::time_point now = Clock::now()) const;

  // Marks down (one commit per node) every node not down whose last heartbeat — or the start of
  // this process, for nodes not heard from since — is more than a TTL before `now`. Returns the
  // ids marked down. A failed commit is logged and retried on the next check.
  std::vector<std::string> check(Clock::time_point now = Clock::now());

  // The start of leading: what the state says of the plugin instances on nodes not heard from
  // yet is from before, so each healthy one is stored as unknown until its agent registers or
  // heartbeats (nodes/node_report.hpp, plan_unknown_until_heard). One commit per node with
  // something healthy; a failed commit is logged and tried again at the next check().
  void unknown_until_heard();

  // unknown_until_heard(), then check() every period until the awaiting coroutine is cancelled
  // (run it in a TaskGroup). The grace of nodes not heard from yet starts now.
  boost::asio::awaitable<void> run();

 private:
  StateStore& store_;
  LivenessOptions options_;
  Clock::time_point started_;
  bool deaf_ = false;           // hearing() was false at the last check
  bool unknown_marked_ = true;  // false from run() until unknown_until_heard() committed for every node
  struct Heard {
    Clock::time_point at;
    std::chrono::milliseconds ttl{0};  // the TTL the node was told then
  };
  std::map<std::string, Heard> last_seen_;
  void touch(const std::string& node_id, Clock::time_point at, std::optional<std::chrono::milliseconds> ttl);
  std::map<std::string, int> unanswered_;  // heartbeats arrived and not answered yet, per node
  log::Logger log_{"liveness"};
};

}  // namespace mooring::controlplane
