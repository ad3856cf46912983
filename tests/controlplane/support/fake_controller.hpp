// Test support: the volumes room's controller calls answered from a script per RPC. An empty
// script answers as the router does when no controller can be asked (UNAVAILABLE, nothing
// sent); every request is recorded.
#pragma once

#include <deque>
#include <stdexcept>
#include <utility>
#include <string>
#include <vector>

#include "services/controlplane/volumes/controller_calls.hpp"

namespace mooring::controlplane {

class FakeController final : public volumes::ControllerCalls {
 public:
  template <class Req, class Resp>
  struct Rpc {
    csi::Rpc rpc;
    std::deque<agentclient::AgentResult<Resp>> script;
    std::vector<Req> requests;
  };

  // A successful answer from the controller on node-1.
  template <class Resp>
  static agentclient::AgentResult<Resp> ok(Resp response) {
    agentclient::AgentResult<Resp> r;
    r.response = std::move(response);
    r.node_id = "node-1";
    return r;
  }
  // A snapshot the plugin reports ready (of a group when `group` is given).
  static ::csi::v1::Snapshot ready_snapshot(const std::string& id, const std::string& source,
                                            const std::string& group = {}) {
    ::csi::v1::Snapshot s;
    s.set_snapshot_id(id);
    s.set_source_volume_id(source);
    s.set_group_snapshot_id(group);
    s.set_ready_to_use(true);
    return s;
  }
  // An answer with this status, classified as the CSI error table does for `rpc`.
  template <class Resp>
  static agentclient::AgentResult<Resp> failed(csi::Rpc rpc, grpc::StatusCode code, std::string error = "scripted") {
    agentclient::AgentResult<Resp> r;
    r.status = grpc::Status(code, error);
    r.outcome = csi::classify(rpc, code);
    r.error = std::move(error);
    return r;
  }

  volumes::Task<::csi::v1::CreateVolumeResponse> create_volume(std::string, std::string,
                                                               ::csi::v1::CreateVolumeRequest req) override {
    co_return next(creates, std::move(req));
  }
  volumes::Task<::csi::v1::DeleteVolumeResponse> delete_volume(std::string, std::string,
                                                               ::csi::v1::DeleteVolumeRequest req) override {
    co_return next(deletes, std::move(req));
  }
  volumes::Task<::csi::v1::ControllerExpandVolumeResponse> controller_expand_volume(
      std::string, std::string, ::csi::v1::ControllerExpandVolumeRequest req) override {
    co_return next(expands, std::move(req));
  }
  volumes::Task<::csi::v1::ControllerModifyVolumeResponse> controller_modify_volume(
      std::string, std::string key, ::csi::v1::ControllerModifyVolumeRequest req) override {
    modify_keys.push_back(std::move(key));
    co_return next(modifies, std::move(req));
  }
  volumes::Task<::csi::v1::GetSnapshotResponse> get_snapshot(std::string, ::csi::v1::GetSnapshotRequest req) override {
    co_return next(snapshot_gets, std::move(req));
  }
  volumes::Task<v1::NodeExpandVolumeResponse> node_expand_volume(std::string node_id,
                                                                 v1::NodeExpandVolumeRequest req) override {
    expanded_nodes.push_back(std::move(node_id));
    co_return next(node_expands, std::move(req));
  }
  volumes::Task<v1::NodeVolumeStatsResponse> node_volume_stats(std::string node_id,
                                                               v1::NodeVolumeStatsRequest req) override {
    stats_nodes.push_back(std::move(node_id));
    co_return next(node_stats, std::move(req));
  }
  volumes::Task<::csi::v1::CreateSnapshotResponse> create_snapshot(std::string, std::string,
                                                                   ::csi::v1::CreateSnapshotRequest req) override {
    co_return next(snapshots, std::move(req));
  }
  volumes::Task<::csi::v1::DeleteSnapshotResponse> delete_snapshot(std::string,
                                                                   ::csi::v1::DeleteSnapshotRequest req) override {
    co_return next(snapshot_deletes, std::move(req));
  }
  volumes::Task<::csi::v1::ListSnapshotsResponse> list_snapshots(std::string,
                                                                 ::csi::v1::ListSnapshotsRequest req) override {
    co_return next(snapshot_lists, std::move(req));
  }
  volumes::Task<::csi::v1::ListVolumesResponse> list_volumes(std::string, ::csi::v1::ListVolumesRequest req) override {
    co_return next(volume_lists, std::move(req));
  }
  volumes::Task<::csi::v1::ValidateVolumeCapabilitiesResponse> validate_volume_capabilities(
      std::string, std::string, ::csi::v1::ValidateVolumeCapabilitiesRequest req) override {
    co_return next(validations, std::move(req));
  }
  // ValidateVolumeCapabilities answers: supported (`confirmed` set), or not (empty, with the
  // plugin's reason).
  static agentclient::AgentResult<::csi::v1::ValidateVolumeCapabilitiesResponse> confirmed() {
    ::csi::v1::ValidateVolumeCapabilitiesResponse resp;
    resp.mutable_confirmed()->add_volume_capabilities();
    return ok(std::move(resp));
  }
  static agentclient::AgentResult<::csi::v1::ValidateVolumeCapabilitiesResponse> unconfirmed(std::string message) {
    ::csi::v1::ValidateVolumeCapabilitiesResponse resp;
    resp.set_message(std::move(message));
    return ok(std::move(resp));
  }

  volumes::Task<::csi::v1::CreateVolumeGroupSnapshotResponse> create_volume_group_snapshot(
      std::string, std::vector<std::string> keys, ::csi::v1::CreateVolumeGroupSnapshotRequest req) override {
    group_create_keys.push_back(std::move(keys));
    co_return next(group_creates, std::move(req));
  }
  volumes::Task<::csi::v1::DeleteVolumeGroupSnapshotResponse> delete_volume_group_snapshot(
      std::string, ::csi::v1::DeleteVolumeGroupSnapshotRequest req) override {
    co_return next(group_deletes, std::move(req));
  }
  volumes::Task<::csi::v1::GetVolumeGroupSnapshotResponse> get_volume_group_snapshot(
      std::string, ::csi::v1::GetVolumeGroupSnapshotRequest req) override {
    co_return next(group_gets, std::move(req));
  }

  Rpc<::csi::v1::CreateVolumeRequest, ::csi::v1::CreateVolumeResponse> creates{csi::Rpc::CreateVolume};
  Rpc<::csi::v1::DeleteVolumeRequest, ::csi::v1::DeleteVolumeResponse> deletes{csi::Rpc::DeleteVolume};
  Rpc<::csi::v1::ControllerExpandVolumeRequest, ::csi::v1::ControllerExpandVolumeResponse> expands{
      csi::Rpc::ControllerExpandVolume};
  Rpc<v1::NodeExpandVolumeRequest, v1::NodeExpandVolumeResponse> node_expands{csi::Rpc::NodeExpandVolume};
  Rpc<::csi::v1::ControllerModifyVolumeRequest, ::csi::v1::ControllerModifyVolumeResponse> modifies{
      csi::Rpc::ControllerModifyVolume};
  Rpc<::csi::v1::GetSnapshotRequest, ::csi::v1::GetSnapshotResponse> snapshot_gets{csi::Rpc::GetSnapshot};
  std::vector<std::string> modify_keys;  // the volume key each modify was serialized on
  Rpc<::csi::v1::CreateSnapshotRequest, ::csi::v1::CreateSnapshotResponse> snapshots{csi::Rpc::CreateSnapshot};
  Rpc<::csi::v1::DeleteSnapshotRequest, ::csi::v1::DeleteSnapshotResponse> snapshot_deletes{csi::Rpc::DeleteSnapshot};
  Rpc<::csi::v1::ListSnapshotsRequest, ::csi::v1::ListSnapshotsResponse> snapshot_lists{csi::Rpc::ListSnapshots};
  Rpc<::csi::v1::ListVolumesRequest, ::csi::v1::ListVolumesResponse> volume_lists{csi::Rpc::ListVolumes};
  Rpc<::csi::v1::ValidateVolumeCapabilitiesRequest, ::csi::v1::ValidateVolumeCapabilitiesResponse> validations{
      csi::Rpc::ValidateVolumeCapabilities};
  Rpc<v1::NodeVolumeStatsRequest, v1::NodeVolumeStatsResponse> node_stats{csi::Rpc::NodeGetVolumeStats};
  Rpc<::csi::v1::CreateVolumeGroupSnapshotRequest, ::csi::v1::CreateVolumeGroupSnapshotResponse> group_creates{
      csi::Rpc::CreateVolumeGroupSnapshot};
  Rpc<::csi::v1::DeleteVolumeGroupSnapshotRequest, ::csi::v1::DeleteVolumeGroupSnapshotResponse> group_deletes{
      csi::Rpc::DeleteVolumeGroupSnapshot};
  Rpc<::csi::v1::GetVolumeGroupSnapshotRequest, ::csi::v1::GetVolumeGroupSnapshotResponse> group_gets{
      csi::Rpc::GetVolumeGroupSnapshot};
  std::vector<std::vector<std::string>> group_create_keys;  // the volume keys each group create held
  std::vector<std::string> expanded_nodes;
  std::vector<std::string> stats_nodes;
  // The next call throws, as a bug below the API would (its exception reaches the endpoint).
  bool throw_next = false;

 private:
  template <class Req, class Resp>
  agentclient::AgentResult<Resp> next(Rpc<Req, Resp>& rpc, Req req) {
    rpc.requests.push_back(std::move(req));
    if (std::exchange(throw_next, false)) throw std::runtime_error("fake controller: a bug");
    return scripted(rpc.script, rpc.rpc, "no healthy controller (fake)");
  }

 public:
  // The script's next answer; with none left, the router's when nobody can be asked (UNAVAILABLE
  // with `nobody`, nothing sent).
  template <class Resp>
  static agentclient::AgentResult<Resp> scripted(std::deque<agentclient::AgentResult<Resp>>& script, csi::Rpc rpc,
                                                 std::string nobody) {
    if (script.empty()) {
      auto r = failed<Resp>(rpc, grpc::StatusCode::UNAVAILABLE, std::move(nobody));
      r.no_target = true;
      return r;
    }
    auto r = std::move(script.front());
    script.pop_front();
    return r;
  }
};

}  // namespace mooring::controlplane
