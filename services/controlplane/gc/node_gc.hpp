// GC room: nodes do not stay forever. A node down for longer than `threshold` (Nomad's
// node_gc_threshold, 24 h by default) and named by no volume claim is purged with its plugin
// instances (nodes/node_purge.hpp), so a cluster that replaces machines does not keep every
// machine it ever had in its node list, its plugin counts and placement's view. Measured from the
// node's "down" event (wall clock, from the state): a control plane restart does not restart it.
#pragma once

#include <chrono>
#include <cstddef>
#include <set>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "shared/async/task_group.hpp"
#include "shared/domain/time.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane {
class StateStore;
}  // namespace mooring::controlplane

namespace mooring::controlplane::gc {

struct NodeGcOptions {
  std::chrono::milliseconds threshold{std::chrono::hours(24)};
  std::chrono::milliseconds period{0};  // between passes; 0: threshold / 8, within [1 s, 5 min]
};

class NodeGc {
 public:
  NodeGc(boost::asio::any_io_executor executor, StateStore& store, NodeGcOptions options = {});
  ~NodeGc();

  void start();
  boost::asio::awaitable<void> stop();

  // One pass at `now`: returns how many nodes it purged.
  std::size_t collect(domain::Time now);

 private:
  StateStore& store_;
  NodeGcOptions options_;
  log::Logger log_{"node-gc"};
  std::set<std::string> refused_;  // said once why a node past the threshold stays
  async::TaskGroup tasks_;         // last
};

}  // namespace mooring::controlplane::gc
