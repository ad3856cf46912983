// A typed CSI client over a plugin's UNIX socket: one awaitable per CSI RPC, the per-attempt
// deadline from the CSI error table, the status classified by that table, reconnection when a
// restarted plugin re-creates its socket, and close() for a final fast-failing fingerprint.
// Retry policy is the caller's (async::retry + csi::classify); this client makes one attempt.
// gRPC stays out of this header (pimpl); include "csi/v1/csi.pb.h" where you use the messages.
#pragma once

#include "shared/csi/error_table.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <grpcpp/support/status.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace csi::v1 {
class GetPluginInfoRequest;
class GetPluginInfoResponse;
class GetPluginCapabilitiesRequest;
class GetPluginCapabilitiesResponse;
class ProbeRequest;
class ProbeResponse;
class CreateVolumeRequest;
class CreateVolumeResponse;
class DeleteVolumeRequest;
class DeleteVolumeResponse;
class ControllerPublishVolumeRequest;
class ControllerPublishVolumeResponse;
class ControllerUnpublishVolumeRequest;
class ControllerUnpublishVolumeResponse;
class ValidateVolumeCapabilitiesRequest;
class ValidateVolumeCapabilitiesResponse;
class ListVolumesRequest;
class ListVolumesResponse;
class GetCapacityRequest;
class GetCapacityResponse;
class ControllerGetCapabilitiesRequest;
class ControllerGetCapabilitiesResponse;
class CreateSnapshotRequest;
class CreateSnapshotResponse;
class DeleteSnapshotRequest;
class DeleteSnapshotResponse;
class ListSnapshotsRequest;
class ListSnapshotsResponse;
class ControllerExpandVolumeRequest;
class ControllerExpandVolumeResponse;
class ControllerModifyVolumeRequest;
class ControllerModifyVolumeResponse;
class GetSnapshotRequest;
class GetSnapshotResponse;
class ControllerGetVolumeRequest;
class ControllerGetVolumeResponse;
class NodeStageVolumeRequest;
class NodeStageVolumeResponse;
class NodeUnstageVolumeRequest;
class NodeUnstageVolumeResponse;
class NodePublishVolumeRequest;
class NodePublishVolumeResponse;
class NodeUnpublishVolumeRequest;
class NodeUnpublishVolumeResponse;
class NodeGetVolumeStatsRequest;
class NodeGetVolumeStatsResponse;
class NodeExpandVolumeRequest;
class NodeExpandVolumeResponse;
class NodeGetCapabilitiesRequest;
class NodeGetCapabilitiesResponse;
class NodeGetInfoRequest;
class NodeGetInfoResponse;
class GroupControllerGetCapabilitiesRequest;
class GroupControllerGetCapabilitiesResponse;
class CreateVolumeGroupSnapshotRequest;
class CreateVolumeGroupSnapshotResponse;
class DeleteVolumeGroupSnapshotRequest;
class DeleteVolumeGroupSnapshotResponse;
class GetVolumeGroupSnapshotRequest;
class GetVolumeGroupSnapshotResponse;
}  // namespace csi::v1

namespace mooring::rpc {

struct ChannelOptions;

template <class Response>
struct CsiResult {
  grpc::Status status;
  Response response;                        // meaningful only when status.ok()
  csi::Outcome outcome = csi::Outcome::ok;  // csi::classify(rpc, status.error_code())

  bool ok() const { return status.ok(); }
  bool done() const { return csi::is_done(outcome); }  // ok, or ignorable (already in the end state)
};

struct CsiCallOptions {
  std::optional<std::chrono::milliseconds> timeout;  // default: csi::policy(rpc).timeout
};

// Use from one executor (single-threaded io_context or strand). Requests are taken by reference
// and must stay alive until the call completes (a temporary inside the co_await is fine).
// Cancelling the awaiting coroutine cancels the RPC (status CANCELLED).
class CsiClient {
 public:
  template <class Response>
  using Call = boost::asio::awaitable<CsiResult<Response>>;
  struct Impl;  // opaque; defined in csi_client.cpp

  // `endpoint`: "unix:///path/csi.sock", "unix:/path" or an absolute socket path. Nothing is
  // dialled until the first call or connect().
  CsiClient(boost::asio::any_io_executor executor, std::string endpoint);
  CsiClient(boost::asio::any_io_executor executor, std::string endpoint, const ChannelOptions& options);
  ~CsiClient();
  CsiClient(const CsiClient&) = delete;
  CsiClient& operator=(const CsiClient&) = delete;

  const std::string& endpoint() const;

  // Dials and waits until connected: true when the plugin's socket accepts within `timeout`.
  boost::asio::awaitable<bool> connect(std::chrono::milliseconds timeout);

  // From now on every call fails at once with UNAVAILABLE "client closed" (outcome per the table);
  // calls in flight are cancelled and report the same. Idempotent.
  void close();
  bool closed() const;

  // The plugin id its calls are recorded under in mooring_csi_rpc_seconds ("" until set: the
  // socket's plugin is not known to whoever dials it first).
  void set_metrics_plugin(std::string plugin_id);

  // Identity
  Call<::csi::v1::GetPluginInfoResponse> get_plugin_info(const ::csi::v1::GetPluginInfoRequest& request,
                                                         CsiCallOptions options = {});
  Call<::csi::v1::GetPluginCapabilitiesResponse> get_plugin_capabilities(
      const ::csi::v1::GetPluginCapabilitiesRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::ProbeResponse> probe(const ::csi::v1::ProbeRequest& request, CsiCallOptions options = {});

  // Controller
  Call<::csi::v1::CreateVolumeResponse> create_volume(const ::csi::v1::CreateVolumeRequest& request,
                                                      CsiCallOptions options = {});
  Call<::csi::v1::DeleteVolumeResponse> delete_volume(const ::csi::v1::DeleteVolumeRequest& request,
                                                      CsiCallOptions options = {});
  Call<::csi::v1::ControllerPublishVolumeResponse> controller_publish_volume(
      const ::csi::v1::ControllerPublishVolumeRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::ControllerUnpublishVolumeResponse> controller_unpublish_volume(
      const ::csi::v1::ControllerUnpublishVolumeRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::ValidateVolumeCapabilitiesResponse> validate_volume_capabilities(
      const ::csi::v1::ValidateVolumeCapabilitiesRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::ListVolumesResponse> list_volumes(const ::csi::v1::ListVolumesRequest& request,
                                                    CsiCallOptions options = {});
  Call<::csi::v1::GetCapacityResponse> get_capacity(const ::csi::v1::GetCapacityRequest& request,
                                                    CsiCallOptions options = {});
  Call<::csi::v1::ControllerGetCapabilitiesResponse> controller_get_capabilities(
      const ::csi::v1::ControllerGetCapabilitiesRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::CreateSnapshotResponse> create_snapshot(const ::csi::v1::CreateSnapshotRequest& request,
                                                          CsiCallOptions options = {});
  Call<::csi::v1::DeleteSnapshotResponse> delete_snapshot(const ::csi::v1::DeleteSnapshotRequest& request,
                                                          CsiCallOptions options = {});
  Call<::csi::v1::ListSnapshotsResponse> list_snapshots(const ::csi::v1::ListSnapshotsRequest& request,
                                                        CsiCallOptions options = {});
  Call<::csi::v1::ControllerExpandVolumeResponse> controller_expand_volume(
      const ::csi::v1::ControllerExpandVolumeRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::ControllerGetVolumeResponse> controller_get_volume(
      const ::csi::v1::ControllerGetVolumeRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::ControllerModifyVolumeResponse> controller_modify_volume(
      const ::csi::v1::ControllerModifyVolumeRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::GetSnapshotResponse> get_snapshot(const ::csi::v1::GetSnapshotRequest& request,
                                                    CsiCallOptions options = {});

  // Node
  Call<::csi::v1::NodeStageVolumeResponse> node_stage_volume(const ::csi::v1::NodeStageVolumeRequest& request,
                                                             CsiCallOptions options = {});
  Call<::csi::v1::NodeUnstageVolumeResponse> node_unstage_volume(const ::csi::v1::NodeUnstageVolumeRequest& request,
                                                                 CsiCallOptions options = {});
  Call<::csi::v1::NodePublishVolumeResponse> node_publish_volume(const ::csi::v1::NodePublishVolumeRequest& request,
                                                                 CsiCallOptions options = {});
  Call<::csi::v1::NodeUnpublishVolumeResponse> node_unpublish_volume(
      const ::csi::v1::NodeUnpublishVolumeRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::NodeGetVolumeStatsResponse> node_get_volume_stats(const ::csi::v1::NodeGetVolumeStatsRequest& request,
                                                                    CsiCallOptions options = {});
  Call<::csi::v1::NodeExpandVolumeResponse> node_expand_volume(const ::csi::v1::NodeExpandVolumeRequest& request,
                                                               CsiCallOptions options = {});
  Call<::csi::v1::NodeGetCapabilitiesResponse> node_get_capabilities(
      const ::csi::v1::NodeGetCapabilitiesRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::NodeGetInfoResponse> node_get_info(const ::csi::v1::NodeGetInfoRequest& request,
                                                     CsiCallOptions options = {});

  // GroupController (CSI v1.9+)
  Call<::csi::v1::GroupControllerGetCapabilitiesResponse> group_controller_get_capabilities(
      const ::csi::v1::GroupControllerGetCapabilitiesRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::CreateVolumeGroupSnapshotResponse> create_volume_group_snapshot(
      const ::csi::v1::CreateVolumeGroupSnapshotRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::DeleteVolumeGroupSnapshotResponse> delete_volume_group_snapshot(
      const ::csi::v1::DeleteVolumeGroupSnapshotRequest& request, CsiCallOptions options = {});
  Call<::csi::v1::GetVolumeGroupSnapshotResponse> get_volume_group_snapshot(
      const ::csi::v1::GetVolumeGroupSnapshotRequest& request, CsiCallOptions options = {});

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace mooring::rpc
