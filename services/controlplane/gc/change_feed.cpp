#include "services/controlplane/gc/change_feed.hpp"

#include <algorithm>

namespace mooring::controlplane::gc {

domain::Status ChangeFeed::apply(const Transaction& tx) {
  // Recorded before the write: the store changes memory (and wakes watchers) only after a
  // successful apply, so a subscriber woken by this commit always finds its keys here.
  subscribers_.erase(std::remove_if(subscribers_.begin(), subscribers_.end(),
                                    [](const auto& s) { return s.second.expired(); }),
                     subscribers_.end());
  for (const auto& m : tx.mutations)
    for (const auto& [table, weak] : subscribers_)
      if (table == m.table)
        if (auto set = weak.lock()) set->keys_.insert(m.key);
  return inner_.apply(tx);
}

std::shared_ptr<ChangeSet> ChangeFeed::subscribe(Table table) {
  auto set = std::make_shared<ChangeSet>();
  subscribers_.emplace_back(table, set);
  return set;
}

}  // namespace mooring::controlplane::gc
