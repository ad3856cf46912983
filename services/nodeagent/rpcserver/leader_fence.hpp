// The rpcserver room: the agent's side of the leader epoch (shared/domain/leader_epoch.hpp).
// It keeps the newest epoch heard, from the control plane's answers to the registration and the
// heartbeats and from the calls themselves, in `<data dir>/leader-epoch` so a restarted agent
// still knows it before it registers again. A call whose epoch is older (a lower revision of the
// same etcd cluster), that comes from another cluster, or that carries none once one is known,
// is refused: it comes from a control plane that no longer leads.
// An answer to the registration or a heartbeat that names another cluster replaces the epoch: a
// control plane that answers them serves (the leader, its lease valid by its own clock), so it is
// the cluster the state now lives in (an etcd restored from a snapshot into a new cluster; a
// move to or from SQLite, whose epoch is none).
// Thread-safe: calls arrive on gRPC's threads, answers on the agent's executor.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "shared/domain/leader_epoch.hpp"

namespace mooring::nodeagent {

class LeaderFence {
 public:
  // Reads the file (absent or unreadable: nothing known, said in the log). An empty path keeps
  // the epoch in memory only (tests).
  explicit LeaderFence(std::filesystem::path file);

  // From an answer of the control plane: a higher revision of the cluster known, or another
  // cluster, becomes the epoch; a lower revision of the same cluster changes nothing.
  void heard(const domain::LeaderEpoch& epoch);

  // A call that carries `epoch` (nullopt: none, or one that did not parse): nullopt to serve it
  // (a newer epoch is remembered), or why it is refused.
  std::optional<std::string> admit(const std::optional<domain::LeaderEpoch>& epoch);

  domain::LeaderEpoch current() const;

 private:
  void store(const domain::LeaderEpoch& epoch);  // mu_ held

  std::filesystem::path file_;
  mutable std::mutex mu_;
  domain::LeaderEpoch known_;
};

}  // namespace mooring::nodeagent
