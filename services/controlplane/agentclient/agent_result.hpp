// Agent client room (agentclient/): what a call to a node agent ended with. A plain value so the rooms that call
// through the router (gc, volumes) can name it in their own interfaces and fakes.
#pragma once

#include <string>

#include <grpcpp/support/status.h>

#include "shared/csi/error_table.hpp"

namespace mooring::controlplane::agentclient {

template <class Response>
struct AgentResult {
  grpc::Status status;
  Response response;                        // meaningful when status.ok()
  csi::Outcome outcome = csi::Outcome::ok;  // the CSI error table's reading of status
  std::string node_id;                      // the node that gave the final answer ("" if none)
  bool no_target = false;                   // no node could be asked (no healthy controller, node unknown)
  bool uncertain_earlier = false;           // a controller asked gave an uncertain answer (it may still act)
  // No agent asked could be connected to after its attempt (down, restarting, unreachable): none
  // answered. Not proof that nothing was sent (a connection may break mid-call).
  bool unreached = false;
  std::string error;  // names the RPC, plugin/volume and every node tried

  bool ok() const { return status.ok(); }
  bool done() const { return csi::is_done(outcome); }
};

}  // namespace mooring::controlplane::agentclient
