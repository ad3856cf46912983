// State room: a backend shared by several control planes, whose writes only the leader makes
// (etcd: state/etcd/etcd_backend.hpp). ha/ drives it through this interface: it fences the
// leader's writes with the key it holds, and learns when a write of unknown outcome needs a reload.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "services/controlplane/state/backend.hpp"

namespace mooring::controlplane {

// What a leader's writes are fenced with (ha/leader_election.hpp): the leader key as this control
// plane created it. Every Txn also compares the key's create revision and value, so once the
// lease is gone (the key deleted, or another leader's key in its place) nothing commits.
struct LeaderFence {
  std::string key;
  std::int64_t create_revision = 0;
  std::uint64_t cluster_id = 0;  // etcd's; with create_revision the leader epoch (domain/leader_epoch.hpp)
  std::string value;
  // False once the lease may have run out by our own clock: checked before every write, so a
  // leader that was paused past its lease refuses at once instead of asking etcd first.
  std::function<bool()> lease_valid;
  // When lease_valid() is false: wait (this thread) for etcd to confirm the lease again, for as
  // long as the election holds writes (LeaderElection::await_lease: one lease past its deadline,
  // so etcd's own raft election does not fail a write); true if it did. Unset: refuse at once.
  std::function<bool()> await_lease;
};

class FencedBackend : public StateBackend {
 public:
  // From now on writes are refused unless a fence is set (a standby never writes), and with one
  // every write is fenced by it. `lost` is called (on the writer's thread) when a write failed
  // because the leader key is no longer ours.
  virtual void require_fence(std::function<void(const std::string& why)> lost) = 0;
  virtual void set_fence(LeaderFence fence) = 0;
  // A write failed (outcome unknown) and no reload followed yet: writes are refused until load()
  // reads the shared state again.
  virtual bool needs_reload() const = 0;
};

}  // namespace mooring::controlplane
