// State room: which objects changed, without scanning every table. A StateBackend decorator sees
// every transaction's mutations (table + key) on its way to the real backend and hands the keys
// to subscribers, so the volume watcher's work per change is proportional to the change, not to
// the number of volumes (Nomad's watcher walks all volumes on every change).
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "services/controlplane/state/backend.hpp"

namespace mooring::controlplane {

// Keys of one table touched since the last take(). A key may be listed even when its write
// failed (it is then simply re-checked). Thread-safe: the store's writer thread records while the
// executor takes.
class ChangeSet {
 public:
  std::set<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(keys_, {});
  }
  bool empty() const {
    std::lock_guard lock(mutex_);
    return keys_.empty();
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return keys_.size();
  }

 private:
  friend class ChangeFeed;
  mutable std::mutex mutex_;
  std::set<std::string> keys_;
};

class ChangeFeed final : public StateBackend {
 public:
  explicit ChangeFeed(StateBackend& inner) : inner_(inner) {}

  domain::Expected<Snapshot> load() override { return inner_.load(); }
  domain::Status apply(const Transaction& tx) override;
  domain::Status apply_group(std::span<const Transaction> txs) override;

  // A new subscriber for a table's keys; it sees changes applied from now on.
  std::shared_ptr<ChangeSet> subscribe(Table table);

 private:
  void record(const Transaction& tx);

  StateBackend& inner_;
  std::mutex mutex_;  // subscribe() on the executor, record() on the store's writer thread
  std::vector<std::pair<Table, std::weak_ptr<ChangeSet>>> subscribers_;
};

}  // namespace mooring::controlplane
