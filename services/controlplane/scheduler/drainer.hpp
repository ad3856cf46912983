// Scheduler room: the drainer carries out node drains (nodes/node_drain.hpp starts them) in the
// order drain_rules.hpp decides: a migrating allocation is stopped in the same commit that places
// its replacement on another eligible node (one per step, so each replacement's placement sees
// the ones before it), the others at the deadline, plugin allocations after the releases they
// serve. Progress goes into the node's LastDrain and the event stream; the drain ends (the node
// stays ineligible) when nothing it must stop is left. Woken by node, allocation and volume
// changes while a drain runs, and by its deadline; each step is one commit, so a restarted
// control plane resumes from the state.
#pragma once

#include <chrono>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "shared/async/task_group.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane {
class StateStore;
class Batch;
}  // namespace mooring::controlplane

namespace mooring::controlplane::scheduler {

struct DrainerOptions {
  std::chrono::milliseconds max_wait{std::chrono::minutes(1)};  // safety recheck
};

class Drainer {
 public:
  Drainer(boost::asio::any_io_executor executor, StateStore& store, DrainerOptions options = {});
  ~Drainer();
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  void start();
  boost::asio::awaitable<void> stop();

  // One step for every draining node at `now` (tests call it directly). Returns the earliest
  // deadline it waits for (unset: none).
  domain::Time pass(domain::Time now);
  bool draining() const { return draining_; }

 private:
  boost::asio::awaitable<void> loop();
  boost::asio::awaitable<void> table_watch(int table_number);

  StateStore& store_;
  DrainerOptions options_;
  log::Logger log_{"drain"};
  bool stopping_ = false;
  bool draining_ = false;  // some node drained at the last pass
  async::WakeSignal wake_;
  async::TaskGroup tasks_;  // last
};

// One drain step of `node` (draining): adds its stops, at most one migration, and the node's
// progress to `batch`; lowers `next` to the deadline. Returns true when it wrote something.
bool drain_step(const StateStore& store, const domain::Node& node, domain::Time now, Batch& batch, domain::Time& next);

}  // namespace mooring::controlplane::scheduler
