#include "services/nodeagent/volumes/csi_node_calls.hpp"

#include "csi/v1/csi.pb.h"

namespace mooring::nodeagent {

// The client is captured by value in each coroutine: a call in flight keeps it alive.
CsiNodeCalls::CsiNodeCalls(std::shared_ptr<rpc::CsiClient> client) : client_(std::move(client)) {}

rpc::CsiClient::Call<::csi::v1::NodeStageVolumeResponse> CsiNodeCalls::stage(const ::csi::v1::NodeStageVolumeRequest& request) {
  auto client = client_;
  co_return co_await client->node_stage_volume(request);
}

rpc::CsiClient::Call<::csi::v1::NodeUnstageVolumeResponse> CsiNodeCalls::unstage(const ::csi::v1::NodeUnstageVolumeRequest& request) {
  auto client = client_;
  co_return co_await client->node_unstage_volume(request);
}

rpc::CsiClient::Call<::csi::v1::NodePublishVolumeResponse> CsiNodeCalls::publish(const ::csi::v1::NodePublishVolumeRequest& request) {
  auto client = client_;
  co_return co_await client->node_publish_volume(request);
}

rpc::CsiClient::Call<::csi::v1::NodeUnpublishVolumeResponse> CsiNodeCalls::unpublish(const ::csi::v1::NodeUnpublishVolumeRequest& request) {
  auto client = client_;
  co_return co_await client->node_unpublish_volume(request);
}

rpc::CsiClient::Call<::csi::v1::NodeExpandVolumeResponse> CsiNodeCalls::expand(const ::csi::v1::NodeExpandVolumeRequest& request) {
  auto client = client_;
  co_return co_await client->node_expand_volume(request);
}

}  // namespace mooring::nodeagent
