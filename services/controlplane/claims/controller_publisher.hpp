// Claims room: what the claim path needs from the controller side — one ControllerPublishVolume
// for a freshly recorded claim. A consumer-side interface so the claim path is tested with a
// fake; the controller router (agentclient/) implements it by picking a node with a healthy
// controller instance of the volume's plugin.
#pragma once

#include <map>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <grpcpp/support/status.h>

#include "shared/domain/plugin.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane {

struct PublishResult {
  grpc::Status status;                                 // the CSI status (OK, or the code of the last attempt)
  std::map<std::string, std::string> publish_context;  // ControllerPublishVolumeResponse.publish_context
  // false only when no controller ever received the call (no healthy controller instance, agent
  // unreachable before sending): nothing can have been published, so nothing must be undone.
  // Leave it true whenever in doubt: the claim is then released with ControllerUnpublish.
  bool sent = true;
  // No controller's agent could be connected to (down, restarting at another address): none
  // answered. The call may still have left before a connection broke, so this never frees a
  // claim; a claim already waiting for its publish keeps waiting instead of being released.
  bool unreached = false;
  // A controller asked before the one whose answer `status` is gave an uncertain answer (a
  // timeout): its publish may still happen, so no later refusal makes the failure certain.
  bool uncertain_earlier = false;
};

class ControllerPublisher {
 public:
  virtual ~ControllerPublisher() = default;
  // ControllerPublishVolume with the volume's external id, `csi_node_id` (the claim's
  // external_node_id: the CSI node id of the claiming node), the capability from the claim's
  // access/attachment modes, readonly = claim.mode == read, the volume's secrets and context.
  // The claim is already durable (state taken) when this is called. Called at most once at a
  // time per volume by the claim path. The arguments stay valid until the awaitable completes.
  // Cancellation (the agent gave up on its call) may throw operation_aborted; the claim then
  // stays recorded and is published again on the agent's retry.
  virtual boost::asio::awaitable<PublishResult> publish(const domain::Volume& volume, const domain::Claim& claim,
                                                        std::string csi_node_id) = 0;
};

}  // namespace mooring::controlplane
