// Agent client room (agentclient/): ControllerPublishVolume for a fresh claim, through the agent router (a node that
// runs a healthy controller instance of the volume's plugin, serialized per volume).
#pragma once

#include "services/controlplane/claims/controller_publisher.hpp"

namespace mooring::controlplane::agentclient {

class AgentRouter;

class RouterPublisher final : public ControllerPublisher {
 public:
  explicit RouterPublisher(AgentRouter& router) : router_(router) {}
  boost::asio::awaitable<PublishResult> publish(const domain::Volume& volume, const domain::Claim& claim,
                                                std::string csi_node_id) override;

 private:
  AgentRouter& router_;
};

}  // namespace mooring::controlplane::agentclient
