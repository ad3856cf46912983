#include "shared/rpc/csi_client.hpp"

#include "shared/log/log.hpp"
#include "shared/rpc/channel.hpp"
#include "shared/rpc/client_call.hpp"
#include "shared/rpc/csi_rpc_metrics.hpp"

#include "csi/v1/csi.grpc.pb.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <set>

namespace mooring::rpc {

namespace asio = boost::asio;
namespace v1 = ::csi::v1;

namespace {

// Stubs over one channel. A call keeps its Stubs alive, so replacing the channel for later
// calls never pulls it from under a call in flight.
struct Stubs {
  explicit Stubs(std::shared_ptr<grpc::Channel> ch)
      : channel(std::move(ch)),
        identity(v1::Identity::NewStub(channel)),
        controller(v1::Controller::NewStub(channel)),
        node(v1::Node::NewStub(channel)),
        group(v1::GroupController::NewStub(channel)) {}
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Identity::Stub> identity;
  std::unique_ptr<v1::Controller::Stub> controller;
  std::unique_ptr<v1::Node::Stub> node;
  std::unique_ptr<v1::GroupController::Stub> group;
};

grpc::Status closed_status() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client closed"); }

}  // namespace

struct CsiClient::Impl {
  Impl(asio::any_io_executor ex, std::string ep, ChannelOptions opts)
      : executor(std::move(ex)), endpoint(std::move(ep)), channel_options(std::move(opts)) {}

  asio::any_io_executor executor;
  std::string endpoint;
  ChannelOptions channel_options;
  std::shared_ptr<Stubs> stubs;
  bool closed = false;
  std::set<grpc::ClientContext*> in_flight;  // contexts of calls awaiting gRPC, for close()
  std::string metrics_plugin;
  CsiRpcMetrics metrics;  // every attempt sent to the plugin (not those refused by close())
  log::Logger log{"csi-client"};

  // A channel in TRANSIENT_FAILURE is waiting out a reconnect backoff; the plugin may well be
  // back already (restarted, socket re-created), so dial afresh instead of failing fast.
  std::shared_ptr<Stubs> current() {
    if (stubs && stubs->channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      log.debug("redialling plugin socket", {{"endpoint", endpoint}});
      stubs.reset();
    }
    if (!stubs) stubs = std::make_shared<Stubs>(make_channel(endpoint, channel_options));
    return stubs;
  }
};

namespace {

template <class Response, class Invoke>
asio::awaitable<CsiResult<Response>> call(std::shared_ptr<CsiClient::Impl> impl, csi::Rpc rpc, CsiCallOptions options,
                                          Invoke invoke) {
  CsiResult<Response> result;
  if (impl->closed) {
    result.status = closed_status();
  } else {
    auto stubs = impl->current();
    const auto started =
        impl->metrics.enabled() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    const CallOptions call_options{.timeout = options.timeout.value_or(csi::policy(rpc).timeout)};
    grpc::ClientContext* context = nullptr;
    result.status = co_await unary(call_options, [&](grpc::ClientContext* ctx, UnaryDone done) {
      context = ctx;
      impl->in_flight.insert(ctx);
      invoke(*stubs, ctx, &result.response, std::move(done));
    });
    // unary() destroyed the context just now, with no handler run in between.
    impl->in_flight.erase(context);
    if (impl->closed && result.status.error_code() == grpc::StatusCode::CANCELLED) result.status = closed_status();
    if (impl->metrics.enabled())
      impl->metrics.observe(impl->metrics_plugin, rpc, result.status.error_code(),
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  result.outcome = csi::classify(rpc, result.status.error_code());
  co_return result;
}

// One unary RPC: the service's stub it goes out on and the stub's callback-API method (the
// overload taking a completion function; the reactor overload does not deduce).
template <class Request, class Response, class Stub, class Async>
asio::awaitable<CsiResult<Response>> send_unary(std::shared_ptr<CsiClient::Impl> impl, csi::Rpc rpc,
                                                const Request& request, CsiCallOptions options,
                                                std::unique_ptr<Stub> Stubs::*stub,
                                                void (Async::*method)(grpc::ClientContext*, const Request*, Response*,
                                                                      std::function<void(grpc::Status)>)) {
  return call<Response>(
      std::move(impl), rpc, options,
      [&request, stub, method](Stubs& s, grpc::ClientContext* ctx, Response* response, UnaryDone done) {
        Async* service = (s.*stub)->async();
        (service->*method)(ctx, &request, response, std::move(done));
      });
}

using IdentityAsync = v1::Identity::StubInterface::async_interface;
using ControllerAsync = v1::Controller::StubInterface::async_interface;
using NodeAsync = v1::Node::StubInterface::async_interface;
using GroupAsync = v1::GroupController::StubInterface::async_interface;

}  // namespace

CsiClient::CsiClient(asio::any_io_executor executor, std::string endpoint)
    : CsiClient(std::move(executor), std::move(endpoint), ChannelOptions{}) {}

CsiClient::CsiClient(asio::any_io_executor executor, std::string endpoint, const ChannelOptions& options)
    : impl_(std::make_shared<Impl>(std::move(executor), normalize_target(endpoint), options)) {}

CsiClient::~CsiClient() { close(); }

const std::string& CsiClient::endpoint() const { return impl_->endpoint; }

asio::awaitable<bool> CsiClient::connect(std::chrono::milliseconds timeout) {
  auto impl = impl_;
  if (impl->closed) co_return false;
  co_return co_await wait_connected(impl->current()->channel, timeout);
}

void CsiClient::close() {
  if (impl_->closed) return;
  impl_->closed = true;
  for (auto* ctx : impl_->in_flight) ctx->TryCancel();
  impl_->stubs.reset();
}

bool CsiClient::closed() const { return impl_->closed; }

void CsiClient::set_metrics_plugin(std::string plugin_id) { impl_->metrics_plugin = std::move(plugin_id); }

CsiClient::Call<v1::GetPluginInfoResponse> CsiClient::get_plugin_info(const v1::GetPluginInfoRequest& request,
                                                                      CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::GetPluginInfo, request, options, &Stubs::identity, &IdentityAsync::GetPluginInfo);
}

CsiClient::Call<v1::GetPluginCapabilitiesResponse> CsiClient::get_plugin_capabilities(
    const v1::GetPluginCapabilitiesRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::GetPluginCapabilities, request, options, &Stubs::identity,
                    &IdentityAsync::GetPluginCapabilities);
}

CsiClient::Call<v1::ProbeResponse> CsiClient::probe(const v1::ProbeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::Probe, request, options, &Stubs::identity, &IdentityAsync::Probe);
}

CsiClient::Call<v1::CreateVolumeResponse> CsiClient::create_volume(const v1::CreateVolumeRequest& request,
                                                                   CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::CreateVolume, request, options, &Stubs::controller,
                    &ControllerAsync::CreateVolume);
}

CsiClient::Call<v1::DeleteVolumeResponse> CsiClient::delete_volume(const v1::DeleteVolumeRequest& request,
                                                                   CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::DeleteVolume, request, options, &Stubs::controller,
                    &ControllerAsync::DeleteVolume);
}

CsiClient::Call<v1::ControllerPublishVolumeResponse> CsiClient::controller_publish_volume(
    const v1::ControllerPublishVolumeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ControllerPublishVolume, request, options, &Stubs::controller,
                    &ControllerAsync::ControllerPublishVolume);
}

CsiClient::Call<v1::ControllerUnpublishVolumeResponse> CsiClient::controller_unpublish_volume(
    const v1::ControllerUnpublishVolumeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ControllerUnpublishVolume, request, options, &Stubs::controller,
                    &ControllerAsync::ControllerUnpublishVolume);
}

CsiClient::Call<v1::ValidateVolumeCapabilitiesResponse> CsiClient::validate_volume_capabilities(
    const v1::ValidateVolumeCapabilitiesRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ValidateVolumeCapabilities, request, options, &Stubs::controller,
                    &ControllerAsync::ValidateVolumeCapabilities);
}

CsiClient::Call<v1::ListVolumesResponse> CsiClient::list_volumes(const v1::ListVolumesRequest& request,
                                                                 CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ListVolumes, request, options, &Stubs::controller, &ControllerAsync::ListVolumes);
}

CsiClient::Call<v1::GetCapacityResponse> CsiClient::get_capacity(const v1::GetCapacityRequest& request,
                                                                 CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::GetCapacity, request, options, &Stubs::controller, &ControllerAsync::GetCapacity);
}

CsiClient::Call<v1::ControllerGetCapabilitiesResponse> CsiClient::controller_get_capabilities(
    const v1::ControllerGetCapabilitiesRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ControllerGetCapabilities, request, options, &Stubs::controller,
                    &ControllerAsync::ControllerGetCapabilities);
}

CsiClient::Call<v1::CreateSnapshotResponse> CsiClient::create_snapshot(const v1::CreateSnapshotRequest& request,
                                                                       CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::CreateSnapshot, request, options, &Stubs::controller,
                    &ControllerAsync::CreateSnapshot);
}

CsiClient::Call<v1::DeleteSnapshotResponse> CsiClient::delete_snapshot(const v1::DeleteSnapshotRequest& request,
                                                                       CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::DeleteSnapshot, request, options, &Stubs::controller,
                    &ControllerAsync::DeleteSnapshot);
}

CsiClient::Call<v1::ListSnapshotsResponse> CsiClient::list_snapshots(const v1::ListSnapshotsRequest& request,
                                                                     CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ListSnapshots, request, options, &Stubs::controller,
                    &ControllerAsync::ListSnapshots);
}

CsiClient::Call<v1::ControllerExpandVolumeResponse> CsiClient::controller_expand_volume(
    const v1::ControllerExpandVolumeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ControllerExpandVolume, request, options, &Stubs::controller,
                    &ControllerAsync::ControllerExpandVolume);
}

CsiClient::Call<v1::ControllerModifyVolumeResponse> CsiClient::controller_modify_volume(
    const v1::ControllerModifyVolumeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ControllerModifyVolume, request, options, &Stubs::controller,
                    &ControllerAsync::ControllerModifyVolume);
}

CsiClient::Call<v1::GetSnapshotResponse> CsiClient::get_snapshot(const v1::GetSnapshotRequest& request,
                                                                 CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::GetSnapshot, request, options, &Stubs::controller, &ControllerAsync::GetSnapshot);
}

CsiClient::Call<v1::ControllerGetVolumeResponse> CsiClient::controller_get_volume(
    const v1::ControllerGetVolumeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::ControllerGetVolume, request, options, &Stubs::controller,
                    &ControllerAsync::ControllerGetVolume);
}

CsiClient::Call<v1::NodeStageVolumeResponse> CsiClient::node_stage_volume(const v1::NodeStageVolumeRequest& request,
                                                                          CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::NodeStageVolume, request, options, &Stubs::node, &NodeAsync::NodeStageVolume);
}

CsiClient::Call<v1::NodeUnstageVolumeResponse> CsiClient::node_unstage_volume(
    const v1::NodeUnstageVolumeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::NodeUnstageVolume, request, options, &Stubs::node, &NodeAsync::NodeUnstageVolume);
}

CsiClient::Call<v1::NodePublishVolumeResponse> CsiClient::node_publish_volume(
    const v1::NodePublishVolumeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::NodePublishVolume, request, options, &Stubs::node, &NodeAsync::NodePublishVolume);
}

CsiClient::Call<v1::NodeUnpublishVolumeResponse> CsiClient::node_unpublish_volume(
    const v1::NodeUnpublishVolumeRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::NodeUnpublishVolume, request, options, &Stubs::node,
                    &NodeAsync::NodeUnpublishVolume);
}

CsiClient::Call<v1::NodeGetVolumeStatsResponse> CsiClient::node_get_volume_stats(
    const v1::NodeGetVolumeStatsRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::NodeGetVolumeStats, request, options, &Stubs::node,
                    &NodeAsync::NodeGetVolumeStats);
}

CsiClient::Call<v1::NodeExpandVolumeResponse> CsiClient::node_expand_volume(const v1::NodeExpandVolumeRequest& request,
                                                                            CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::NodeExpandVolume, request, options, &Stubs::node, &NodeAsync::NodeExpandVolume);
}

CsiClient::Call<v1::NodeGetCapabilitiesResponse> CsiClient::node_get_capabilities(
    const v1::NodeGetCapabilitiesRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::NodeGetCapabilities, request, options, &Stubs::node,
                    &NodeAsync::NodeGetCapabilities);
}

CsiClient::Call<v1::NodeGetInfoResponse> CsiClient::node_get_info(const v1::NodeGetInfoRequest& request,
                                                                  CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::NodeGetInfo, request, options, &Stubs::node, &NodeAsync::NodeGetInfo);
}

CsiClient::Call<v1::GroupControllerGetCapabilitiesResponse> CsiClient::group_controller_get_capabilities(
    const v1::GroupControllerGetCapabilitiesRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::GroupControllerGetCapabilities, request, options, &Stubs::group,
                    &GroupAsync::GroupControllerGetCapabilities);
}

CsiClient::Call<v1::CreateVolumeGroupSnapshotResponse> CsiClient::create_volume_group_snapshot(
    const v1::CreateVolumeGroupSnapshotRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::CreateVolumeGroupSnapshot, request, options, &Stubs::group,
                    &GroupAsync::CreateVolumeGroupSnapshot);
}

CsiClient::Call<v1::DeleteVolumeGroupSnapshotResponse> CsiClient::delete_volume_group_snapshot(
    const v1::DeleteVolumeGroupSnapshotRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::DeleteVolumeGroupSnapshot, request, options, &Stubs::group,
                    &GroupAsync::DeleteVolumeGroupSnapshot);
}

CsiClient::Call<v1::GetVolumeGroupSnapshotResponse> CsiClient::get_volume_group_snapshot(
    const v1::GetVolumeGroupSnapshotRequest& request, CsiCallOptions options) {
  return send_unary(impl_, csi::Rpc::GetVolumeGroupSnapshot, request, options, &Stubs::group,
                    &GroupAsync::GetVolumeGroupSnapshot);
}

}  // namespace mooring::rpc
