#include "services/controlplane/gc/alloc_gc.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include "services/controlplane/gc/gc_passes.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane::gc {

namespace asio = boost::asio;

AllocGc::AllocGc(asio::any_io_executor executor, StateStore& store, AllocGcOptions options)
    : store_(store), options_(options), tasks_(std::move(executor), "alloc-gc") {}

AllocGc::~AllocGc() = default;

std::size_t AllocGc::collect(Clock::time_point now) {
  std::set<std::string> claiming;  // allocations any volume still has a claim of
  for (const auto& [id, v] : store_.volumes())
    for (const auto& [alloc_id, claim] : v.claims) claiming.insert(alloc_id);

  std::map<std::string, Clock::time_point> since;
  std::vector<std::string> due;
  for (const auto& [id, a] : store_.allocations()) {
    if (!domain::is_terminal(a) || claiming.contains(id)) continue;
    auto it = since_.find(id);
    const auto first = it == since_.end() ? now : it->second;
    since.emplace(id, first);
    if (now - first >= options_.threshold) due.push_back(id);
  }
  since_ = std::move(since);  // forgets allocations that are gone or collectable no more

  std::size_t deleted = 0;
  for (std::size_t start = 0; start < due.size(); start += options_.batch) {
    const std::size_t end = std::min(due.size(), start + options_.batch);
    Batch batch;
    for (std::size_t i = start; i < end; ++i) batch.erase_allocation(due[i]);
    batch.add_event({.topic = "Allocation",
                     .type = "AllocationsCollected",
                     .key = "",
                     .message = std::to_string(end - start) + " terminal allocations without claims deleted after " +
                                domain::format_duration(options_.threshold),
                     .details = {{"count", std::to_string(end - start)}, {"first", due[start]}}});
    if (auto r = store_.commit(std::move(batch)); !r) {
      log_.error("cannot delete terminal allocations; retrying on the next pass", {{"error", r.error()}});
      break;
    }
    for (std::size_t i = start; i < end; ++i) since_.erase(due[i]);
    deleted += end - start;
  }
  if (deleted) log_.info("terminal allocations deleted", {{"count", deleted}, {"threshold", options_.threshold}});
  return deleted;
}

void AllocGc::start() {
  start_passes(tasks_, "alloc-gc", pass_period(options_.period, options_.threshold, 4),
               [this] { collect(Clock::now()); });
}

asio::awaitable<void> AllocGc::stop() {
  tasks_.cancel();
  co_await tasks_.join();
}

}  // namespace mooring::controlplane::gc
