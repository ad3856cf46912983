// The control plane's copy of this node's allocations, as the WatchAllocations answers built it.
// An answer sends in full only the allocations this agent does not hold as they are now, and names
// the others by id and modify index (controlplane.proto), so each change costs one allocation on
// both sides rather than the node's whole set. This class keeps the bodies, says what to ask with,
// and refuses an answer it cannot complete (the caller then asks again for everything). Pure.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shared/domain/allocation.hpp"
#include "shared/domain/result.hpp"

namespace mooring::nodeagent {

// One answer, decoded.
struct WatchAnswer {
  std::uint64_t index = 0;
  std::uint64_t incarnation = 0;                                 // 0: a control plane without deltas
  std::vector<domain::Allocation> changed;                       // in full
  std::vector<std::pair<std::string, std::uint64_t>> unchanged;  // id, modify index
};

// The node's set after an answer: every allocation listed (pointing into WatchedAllocations,
// valid until its next take()), and those that came by id only.
struct ListedAllocations {
  std::map<std::string, const domain::Allocation*> all;
  std::set<std::string> unchanged;
};

class WatchedAllocations {
 public:
  // The index and incarnation of the last answer taken (0: none; the next request is a first look).
  std::uint64_t index() const { return index_; }
  std::uint64_t incarnation() const { return incarnation_; }

  // The bodies to name in a request (id -> modify index), except those `refetch` wants in full.
  std::map<std::string, std::uint64_t> known(const std::function<bool(const std::string&)>& refetch) const;

  // Takes the answer to a request that named `asked`: the bodies held become the answer's set.
  // Refused, with everything forgotten, when an unchanged entry cannot be completed from what was
  // asked with (not named, at another modify index, another incarnation) or comes with an index
  // below the one held (a state reset the incarnation did not show): the caller asks again as a
  // first look. An answer with every allocation in full is always taken.
  domain::Expected<ListedAllocations> take(WatchAnswer answer, const std::map<std::string, std::uint64_t>& asked);

  // Holds nothing: the next request is a first look.
  void forget();

 private:
  domain::Status check(const WatchAnswer& answer, const std::map<std::string, std::uint64_t>& asked) const;

  std::map<std::string, domain::Allocation> held_;
  std::uint64_t index_ = 0;
  std::uint64_t incarnation_ = 0;
};

}  // namespace mooring::nodeagent
