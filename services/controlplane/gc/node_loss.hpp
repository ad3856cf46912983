// GC room: node loss (seed 004). A node that misses heartbeats is marked down by the liveness
// loop; here, allocations on a down node that set stop_after_client_disconnect are considered
// stopped (client status lost) once that time has passed — the disconnected agent stops them on
// its own side by then — and their claims move to release. The claim GC then treats their node
// plugin as abandoned (no node RPC) and detaches and frees the volumes through a controller.
// Allocations without the setting are left alone: their claims wait, visibly, for the node to
// return or for an operator's detach.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "shared/async/task_group.hpp"
#include "shared/domain/allocation.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane {
class StateStore;
class Batch;
}  // namespace mooring::controlplane

namespace mooring::controlplane::gc {

struct NodeLossOptions {
  // Upper bound on the sleep between checks (node changes and deadlines wake it sooner).
  std::chrono::milliseconds max_wait{std::chrono::minutes(1)};
};

class NodeLossMonitor {
 public:
  NodeLossMonitor(boost::asio::any_io_executor executor, StateStore& store, NodeLossOptions options = {});
  ~NodeLossMonitor();

  void start();
  boost::asio::awaitable<void> stop();

  // One pass: marks lost every allocation whose stop_after_client_disconnect has passed on a
  // down node, and moves its claims to release. Returns the next such deadline (unset: none).
  // Allocations are scanned only when the set of down nodes changed or a deadline came due.
  domain::Time check(domain::Time now);
  std::uint64_t scans() const { return scans_; }

 private:
  boost::asio::awaitable<void> loop();

  StateStore& store_;
  NodeLossOptions options_;
  log::Logger log_{"node-loss"};
  std::set<std::string> down_;  // down nodes at the last scan
  domain::Time next_deadline_{};
  std::uint64_t scans_ = 0;
  bool stopping_ = false;
  async::TaskGroup tasks_;  // last
};

// Adds to `batch` what marking `alloc` lost writes: the allocation (client status lost, desired
// stop, a task event) and its claims moved from taken to unpublishing. Shared with the operator
// detach of a down node. `reason` becomes the task and cluster event message.
void mark_allocation_lost(const StateStore& store, const domain::Allocation& alloc, const std::string& reason,
                          Batch& batch, domain::Time now);

}  // namespace mooring::controlplane::gc
