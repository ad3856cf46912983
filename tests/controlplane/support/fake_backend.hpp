// Test support: an in-memory StateBackend that can be told to fail, and that counts and keeps
// every transaction (and group) so tests can check what was (not) persisted. With group commit
// the store applies from its writer thread: read the records once the store says they are
// durable (its answer comes through the executor, after the apply).
#pragma once

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "services/controlplane/state/backend.hpp"

namespace mooring::controlplane {

class FakeBackend final : public StateBackend {
 public:
  domain::Expected<Snapshot> load() override {
    if (const auto delay = load_delay.load(); delay.count() > 0) std::this_thread::sleep_for(delay);  // a slow etcd
    if (fail_load) return domain::error("fake: load failed");
    return snapshot;
  }
  domain::Status apply(const Transaction& tx) override {
    if (fail_apply) return domain::error("fake: disk full");
    transactions.push_back(tx);
    for (const auto& m : tx.mutations) {
      if (m.value)
        snapshot.rows[m.table][m.key] = *m.value;
      else
        snapshot.rows[m.table].erase(m.key);
    }
    snapshot.index = tx.index;
    for (auto t : tx.tables) snapshot.table_index[t] = tx.index;
    return {};
  }
  domain::Status apply_group(std::span<const Transaction> txs) override {
    if (const auto delay = group_delay.load(); delay.count() > 0) std::this_thread::sleep_for(delay);  // a slow disk
    if (fail_apply) return domain::error("fake: disk full");
    groups.push_back(txs.size());
    for (const auto& tx : txs) (void)apply(tx);
    return {};
  }

  Snapshot snapshot;
  std::vector<Transaction> transactions;
  std::vector<std::size_t> groups;  // size of each apply_group call (group commit)
  // Set by tests while the store's writer thread may be applying.
  std::atomic<bool> fail_apply = false;
  std::atomic<bool> fail_load = false;
  std::atomic<std::chrono::milliseconds> group_delay{std::chrono::milliseconds(0)};
  std::atomic<std::chrono::milliseconds> load_delay{std::chrono::milliseconds(0)};
};

}  // namespace mooring::controlplane
