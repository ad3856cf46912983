// HA room: what a control plane does as its election turns (leader_election.hpp). Elected: load
// the state and lead. Unconfirmed (no renewal confirmed in time): writes and calls out are held
// (lease_hold.hpp), reads answered from memory. Degraded (etcd has no quorum or cannot be
// reached): the store refuses commits and the router every call to a node. Restored: reload first
// if a write's outcome is unknown, then lead again. Lost: step down by re-executing this program
// as a standby.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "services/controlplane/ha/leader_election.hpp"
#include "services/controlplane/ha/lease_hold.hpp"
#include "shared/domain/leader_epoch.hpp"
#include "shared/domain/result.hpp"

namespace mooring::async {
class TaskGroup;
}
namespace mooring::controlplane {
class StateStore;
class FencedBackend;
}  // namespace mooring::controlplane

namespace mooring::controlplane::ha {

// Steps down: starts over as this same program with the same arguments (`argv`), every
// descriptor closed first. `failed_load`: the state did not load, so the next standby holds back
// from the election (campaign_delay).
[[noreturn]] void restart_as_standby(char** argv, const std::string& why, bool failed_load = false);

// How long a standby started by restart_as_standby(..., true) waits before it campaigns: lease ×
// 2^(n-1) after n such restarts in a row, at most 32 s; 0 otherwise.
std::chrono::milliseconds campaign_delay(std::chrono::milliseconds lease);

// What the leader works with; all outlive the Leadership. The rooms it pauses and wakes are
// reached through the callbacks, so this room depends on none of them.
struct LeadershipParts {
  boost::asio::any_io_executor executor;  // the io thread every event is posted to
  char** argv = nullptr;                  // for restart_as_standby
  StateStore& store;
  FencedBackend& backend;                      // the shared state (etcd) whose writes the leader fences
  async::TaskGroup& tasks;                     // runs resume and the broken-store watch
  std::function<domain::Status()> load_state;  // the store's load, logged
  std::function<void()> lead;                  // starts what only the leader runs
  // Refuse every call to a node, as not sent, for this reason (nullopt: make them again).
  std::function<void(std::optional<std::string> why)> pause_calls;
  // Leading again after a degraded spell: what waited meanwhile goes on now.
  std::function<void()> resumed;
};

class Leadership {
 public:
  Leadership(LeadershipParts parts, ElectionOptions options);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  void start() { election_->start(); }
  LeaderElection& election() { return *election_; }
  const LeaderElection& election() const { return *election_; }
  // Where writes and calls out wait while the lease is unconfirmed (io thread); woken as the
  // election reports the lease and as the store takes writes again.
  LeaseHold& lease_hold() { return *hold_; }
  // Elected and loaded (io thread): the API is served here.
  bool serving() const { return serving_; }
  // The epoch this process was elected with (io thread; nullopt before): its calls to agents
  // carry it, also after the leadership is lost, so agents that heard a newer one refuse them.
  std::optional<domain::LeaderEpoch> epoch() const { return epoch_; }

  // The store's on_broken: a failed write whose reload failed too. While etcd cannot be reached
  // the election degrades (or already has) and the reload waits for its answer; a store still
  // broken two leases later while etcd answers would hold the lease and refuse every write, so
  // the leader steps down then.
  void store_broken(const std::string& why);

 private:
  void elected(LeaderFence fence);
  void degrade(const std::string& why);
  boost::asio::awaitable<void> resume();

  LeadershipParts parts_;
  std::chrono::milliseconds lease_;
  bool serving_ = false;
  std::optional<domain::LeaderEpoch> epoch_;
  bool reload_on_resume_ = false;             // a write's outcome was unknown while etcd could not be reached
  std::unique_ptr<LeaseHold> hold_;           // made right after the election it reads
  std::unique_ptr<LeaderElection> election_;  // last: its thread posts to us, and is joined first
};

}  // namespace mooring::controlplane::ha
