// What the CSI plugin hook needs from the agent's plugin supervision, seen from the consumer side:
// supervise an allocation's plugin task until it is healthy and registered, and learn that it
// stopped. The agent wires it to plugins/allocation_plugins.hpp; unit tests of the runner use a fake.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <string>

#include "shared/domain/allocation.hpp"
#include "shared/domain/result.hpp"

namespace mooring::nodeagent {

// type ("PluginHealthy", ...) and message of a task event.
using PluginTaskEvents = std::function<void(std::string type, std::string message)>;

class PluginTaskSupervision {
 public:
  virtual ~PluginTaskSupervision() = default;
  // The task runs and listens (or will) on `socket_path`: probes it until healthy within the
  // plugin's health timeout, fingerprints and registers it as owned by `alloc_id`, then keeps
  // supervising it in the background. An error says why it did not become healthy. Cancellable.
  // `create_index` (the allocation's CreateIndex) orders two instances of one plugin id on a node
  // (an upgrade step): the newer allocation's healthy instance serves, whichever registered last.
  virtual boost::asio::awaitable<domain::Status> supervise(const std::string& alloc_id, std::uint64_t create_index,
                                                           const domain::TaskCSIPlugin& plugin,
                                                           const std::string& socket_path, PluginTaskEvents events) = 0;
  // The task ended or was stopped (also when this run of the agent never supervised it). Returns
  // at once: the final fingerprint and the deregistration (now, or once no volume on this node
  // needs the plugin any more) run in the background.
  virtual void stopped(const std::string& alloc_id) = 0;
};

}  // namespace mooring::nodeagent
