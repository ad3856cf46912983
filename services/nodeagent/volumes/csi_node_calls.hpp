// NodeVolumeCalls over the typed CSI client: the real plugin behind the volume manager, with the
// per-RPC deadlines of the CSI error table.
#pragma once

#include "services/nodeagent/volumes/node_plugins.hpp"
#include "shared/rpc/csi_client.hpp"

#include <memory>

namespace mooring::nodeagent {

// NodeVolumeCalls over the typed CSI client (per-RPC deadlines from the error table).
class CsiNodeCalls final : public NodeVolumeCalls {
 public:
  explicit CsiNodeCalls(std::shared_ptr<rpc::CsiClient> client);
  rpc::CsiClient::Call<::csi::v1::NodeStageVolumeResponse> stage(const ::csi::v1::NodeStageVolumeRequest& request) override;
  rpc::CsiClient::Call<::csi::v1::NodeUnstageVolumeResponse> unstage(const ::csi::v1::NodeUnstageVolumeRequest& request) override;
  rpc::CsiClient::Call<::csi::v1::NodePublishVolumeResponse> publish(const ::csi::v1::NodePublishVolumeRequest& request) override;
  rpc::CsiClient::Call<::csi::v1::NodeUnpublishVolumeResponse> unpublish(const ::csi::v1::NodeUnpublishVolumeRequest& request) override;
  rpc::CsiClient::Call<::csi::v1::NodeExpandVolumeResponse> expand(const ::csi::v1::NodeExpandVolumeRequest& request) override;

  rpc::CsiClient& client() { return *client_; }

 private:
  std::shared_ptr<rpc::CsiClient> client_;
};

}  // namespace mooring::nodeagent
