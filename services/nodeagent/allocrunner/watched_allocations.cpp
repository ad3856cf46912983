#include "services/nodeagent/allocrunner/watched_allocations.hpp"

#include "shared/domain/text.hpp"

namespace mooring::nodeagent {

using domain::in_quotes;

std::map<std::string, std::uint64_t> WatchedAllocations::known(
    const std::function<bool(const std::string&)>& refetch) const {
  std::map<std::string, std::uint64_t> out;
  if (incarnation_ == 0) return out;  // a control plane that sends everything in full anyway
  for (const auto& [id, a] : held_)
    if (!refetch(id)) out.emplace(id, a.modify_index);
  return out;
}

domain::Status WatchedAllocations::check(const WatchAnswer& answer,
                                         const std::map<std::string, std::uint64_t>& asked) const {
  if (answer.unchanged.empty()) return {};
  if (answer.incarnation == 0 || answer.incarnation != incarnation_)
    return domain::error(
        "the answer names allocations as unchanged, but for another incarnation of the control "
        "plane's state than the one this agent holds");
  if (answer.index < index_)
    return domain::error("the answer names allocations as unchanged, but its index went backwards (" +
                         std::to_string(index_) + " -> " + std::to_string(answer.index) + ")");
  for (const auto& [id, modify_index] : answer.unchanged) {
    const auto a = asked.find(id);
    const auto h = held_.find(id);
    if (a == asked.end() || a->second != modify_index || h == held_.end() || h->second.modify_index != modify_index)
      return domain::error("allocation " + in_quotes(id) + " is named unchanged at modify index " +
                           std::to_string(modify_index) + ", which this agent did not ask with");
  }
  return {};
}

domain::Expected<ListedAllocations> WatchedAllocations::take(WatchAnswer answer,
                                                             const std::map<std::string, std::uint64_t>& asked) {
  if (auto st = check(answer, asked); !st) {
    forget();
    return domain::error(st.error());
  }
  std::map<std::string, domain::Allocation> next;
  for (const auto& [id, modify_index] : answer.unchanged) {
    if (auto node = held_.extract(id)) next.insert(std::move(node));  // the body moves, nothing is copied
  }
  ListedAllocations out;
  for (const auto& [id, a] : next) out.unchanged.insert(id);
  for (auto& a : answer.changed) {
    out.unchanged.erase(a.id);  // a body in full wins
    next.insert_or_assign(a.id, std::move(a));
  }
  held_ = std::move(next);
  index_ = answer.index;
  incarnation_ = answer.incarnation;
  for (const auto& [id, a] : held_) out.all.emplace(id, &a);
  return out;
}

void WatchedAllocations::forget() {
  held_.clear();
  index_ = 0;
  incarnation_ = 0;
}

}  // namespace mooring::nodeagent
