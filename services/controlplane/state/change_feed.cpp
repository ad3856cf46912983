#include "services/controlplane/state/change_feed.hpp"

#include <algorithm>

namespace mooring::controlplane {

domain::Status ChangeFeed::apply(const Transaction& tx) {
  record(tx);
  return inner_.apply(tx);
}

domain::Status ChangeFeed::apply_group(std::span<const Transaction> txs) {
  for (const auto& tx : txs) record(tx);
  return inner_.apply_group(txs);
}

// Recorded before the write: the store wakes watchers only after a successful apply, so a
// subscriber woken by a commit always finds its keys here.
void ChangeFeed::record(const Transaction& tx) {
  std::lock_guard lock(mutex_);
  subscribers_.erase(
      std::remove_if(subscribers_.begin(), subscribers_.end(), [](const auto& s) { return s.second.expired(); }),
      subscribers_.end());
  for (const auto& m : tx.mutations)
    for (const auto& [table, weak] : subscribers_)
      if (table == m.table)
        if (auto set = weak.lock()) {
          std::lock_guard keys(set->mutex_);
          set->keys_.insert(m.key);
        }
}

std::shared_ptr<ChangeSet> ChangeFeed::subscribe(Table table) {
  auto set = std::make_shared<ChangeSet>();
  std::lock_guard lock(mutex_);
  subscribers_.emplace_back(table, set);
  return set;
}

}  // namespace mooring::controlplane
