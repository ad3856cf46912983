// GC room: allocations do not stay forever. An allocation that is terminal (complete, failed or
// lost) and holds no claim on any volume (past claims included: the claim GC still reads it) is
// deleted once it has been so for `threshold`, in batches, with one cluster event per batch.
// Without this the allocations table, the memory behind it and every agent long poll (which
// scans it) grow with every allocation ever run.
// The agent sees a collected allocation gone from its long poll and drops its local state; a
// late status report for it is acknowledged and ignored (see update_allocations).
// "Has been so" is measured from when this process first saw it collectable, on the steady
// clock: a restart starts the wait again, and wall-clock jumps change nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "shared/async/task_group.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane {
class StateStore;
}  // namespace mooring::controlplane

namespace mooring::controlplane::gc {

struct AllocGcOptions {
  std::chrono::milliseconds threshold{std::chrono::hours(1)};
  std::chrono::milliseconds period{0};  // between passes; 0: threshold / 4, within [1 s, 5 min]
  std::size_t batch = 500;              // allocations deleted per transaction
};

class AllocGc {
 public:
  using Clock = std::chrono::steady_clock;

  AllocGc(boost::asio::any_io_executor executor, StateStore& store, AllocGcOptions options = {});
  ~AllocGc();

  void start();
  boost::asio::awaitable<void> stop();

  // One pass at `now`: returns how many allocations it deleted. A failed write is logged and the
  // same allocations are tried again on the next pass.
  std::size_t collect(Clock::time_point now);
  std::size_t waiting() const { return since_.size(); }  // collectable, threshold not reached

 private:
  StateStore& store_;
  AllocGcOptions options_;
  log::Logger log_{"alloc-gc"};
  std::map<std::string, Clock::time_point> since_;  // first seen collectable
  async::TaskGroup tasks_;                          // last
};

}  // namespace mooring::controlplane::gc
