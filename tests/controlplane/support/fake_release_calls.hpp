// Test support: the claim GC's agent calls (gc/release_calls.hpp) answered in process from a
// script per RPC, with no agent and no gRPC port. Every request is recorded with where it went;
// an empty script answers as the router does when nobody can be asked (UNAVAILABLE, not sent).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "services/controlplane/gc/release_calls.hpp"
#include "tests/controlplane/support/fake_controller.hpp"

namespace mooring::controlplane {

class FakeReleaseCalls final : public gc::ReleaseCalls {
 public:
  // FakeController's script and requests, and where each request went.
  template <class Req, class Resp>
  struct Rpc : FakeController::Rpc<Req, Resp> {
    std::vector<std::string> targets;        // the node (node calls) or the plugin (controller calls)
    std::vector<std::string> volume_keys;    // controller calls: the key they were serialized under
    std::vector<std::string> operation_ids;  // unpublishes
  };

  gc::Call<v1::NodeDetachVolumeResponse> node_detach_volume(std::string node_id,
                                                            v1::NodeDetachVolumeRequest req) override {
    co_return next(node_detaches, std::move(node_id), {}, std::move(req));
  }
  gc::Call<::csi::v1::ControllerUnpublishVolumeResponse> controller_unpublish_volume(
      std::string plugin_id, std::string key, ::csi::v1::ControllerUnpublishVolumeRequest req,
      std::string operation_id) override {
    unpublishes.operation_ids.push_back(std::move(operation_id));
    co_return next(unpublishes, std::move(plugin_id), std::move(key), std::move(req));
  }
  gc::Call<::csi::v1::ControllerGetVolumeResponse> controller_get_volume(
      std::string plugin_id, std::string key, ::csi::v1::ControllerGetVolumeRequest req) override {
    co_return next(gets, std::move(plugin_id), std::move(key), std::move(req));
  }
  gc::Call<::csi::v1::ListVolumesResponse> list_volumes(std::string plugin_id,
                                                        ::csi::v1::ListVolumesRequest req) override {
    co_return next(lists, std::move(plugin_id), {}, std::move(req));
  }

  // The answers FakeController builds: success, or a status classified as the CSI table does.
  template <class Resp>
  static agentclient::AgentResult<Resp> ok() {
    return FakeController::ok(Resp{});
  }
  template <class Resp>
  static agentclient::AgentResult<Resp> failed(csi::Rpc rpc, grpc::StatusCode code, std::string error) {
    return FakeController::failed<Resp>(rpc, code, std::move(error));
  }

  Rpc<v1::NodeDetachVolumeRequest, v1::NodeDetachVolumeResponse> node_detaches{{csi::Rpc::NodeUnpublishVolume}};
  Rpc<::csi::v1::ControllerUnpublishVolumeRequest, ::csi::v1::ControllerUnpublishVolumeResponse> unpublishes{
      {csi::Rpc::ControllerUnpublishVolume}};
  Rpc<::csi::v1::ControllerGetVolumeRequest, ::csi::v1::ControllerGetVolumeResponse> gets{
      {csi::Rpc::ControllerGetVolume}};
  Rpc<::csi::v1::ListVolumesRequest, ::csi::v1::ListVolumesResponse> lists{{csi::Rpc::ListVolumes}};

 private:
  template <class Req, class Resp>
  static agentclient::AgentResult<Resp> next(Rpc<Req, Resp>& rpc, std::string target, std::string key, Req req) {
    rpc.requests.push_back(std::move(req));
    rpc.targets.push_back(std::move(target));
    rpc.volume_keys.push_back(std::move(key));
    return FakeController::scripted(rpc.script, rpc.rpc, "nobody to ask (fake)");
  }
};

}  // namespace mooring::controlplane
