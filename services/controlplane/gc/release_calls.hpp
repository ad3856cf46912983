// GC room: the agent calls a claim's release makes, and the requests it sends. A consumer-side
// interface, as volumes/controller_calls.hpp is, so the claim GC is tested on an in-process fake
// (tests/controlplane/support/fake_release_calls.hpp); RouterReleaseCalls sends them through the
// agent router.
#pragma once

#include <string>

#include <boost/asio/awaitable.hpp>

#include "csi/v1/csi.pb.h"
#include "mooring/v1/nodeagent.pb.h"
#include "services/controlplane/agentclient/agent_result.hpp"

namespace mooring::domain {
struct Claim;
struct Volume;
}  // namespace mooring::domain
namespace mooring::controlplane::agentclient {
class AgentRouter;
}

namespace mooring::controlplane::gc {

template <class R>
using Call = boost::asio::awaitable<agentclient::AgentResult<R>>;

class ReleaseCalls {
 public:
  virtual ~ReleaseCalls() = default;
  // To the claim's node: the agent unpublishes and, when the last user is gone, unstages.
  virtual Call<v1::NodeDetachVolumeResponse> node_detach_volume(std::string node_id,
                                                                v1::NodeDetachVolumeRequest request) = 0;
  // To a healthy controller of the plugin, serialized per volume (`volume_key`); the agent runs
  // one `operation_id` once and answers a repeat from its result.
  virtual Call<::csi::v1::ControllerUnpublishVolumeResponse> controller_unpublish_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerUnpublishVolumeRequest request,
      std::string operation_id) = 0;
  // A resumed release asks these first: is the volume still published to the node?
  virtual Call<::csi::v1::ControllerGetVolumeResponse> controller_get_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerGetVolumeRequest request) = 0;
  virtual Call<::csi::v1::ListVolumesResponse> list_volumes(std::string plugin_id,
                                                            ::csi::v1::ListVolumesRequest request) = 0;
};

class RouterReleaseCalls final : public ReleaseCalls {
 public:
  explicit RouterReleaseCalls(agentclient::AgentRouter& router) : router_(router) {}
  Call<v1::NodeDetachVolumeResponse> node_detach_volume(std::string node_id,
                                                        v1::NodeDetachVolumeRequest request) override;
  Call<::csi::v1::ControllerUnpublishVolumeResponse> controller_unpublish_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerUnpublishVolumeRequest request,
      std::string operation_id) override;
  Call<::csi::v1::ControllerGetVolumeResponse> controller_get_volume(
      std::string plugin_id, std::string volume_key, ::csi::v1::ControllerGetVolumeRequest request) override;
  Call<::csi::v1::ListVolumesResponse> list_volumes(std::string plugin_id,
                                                    ::csi::v1::ListVolumesRequest request) override;

 private:
  agentclient::AgentRouter& router_;
};

// The node step's request: the claim's modes, the volume's key in the state (the agent's records
// and directories are named by it) and the provider's id.
v1::NodeDetachVolumeRequest node_detach_request(const std::string& volume_key, const domain::Volume& v,
                                                const domain::Claim& claim);
// The controller step's request: the provider's ids, never ours (seed 001), and the volume's secrets.
::csi::v1::ControllerUnpublishVolumeRequest controller_unpublish_request(const domain::Volume& v,
                                                                         const std::string& external_node_id);

}  // namespace mooring::controlplane::gc
