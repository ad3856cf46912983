#include "services/nodeagent/controlplane/controlplane_calls.hpp"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "services/nodeagent/controlplane/controlplane_target.hpp"
#include "shared/rpc/channel.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;

bool answered(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED: return false;
    default: return true;
  }
}

class GrpcControlPlaneCalls final : public ControlPlaneCalls {
 public:
  explicit GrpcControlPlaneCalls(GrpcControlPlaneOptions options)
      : options_(std::move(options)),
        target_(options_.target ? options_.target : make_controlplane_target(options_.address, options_.channel)) {}

  asio::awaitable<grpc::Status> watch_allocations(const v1::WatchAllocationsRequest& request,
                                                  v1::WatchAllocationsResponse& response) override {
    const auto timeout = options_.call_timeout + std::chrono::milliseconds(std::max<int64_t>(request.wait_ms(), 0));
    co_return co_await call(timeout, [&](v1::ControlPlane::Stub& stub, grpc::ClientContext* ctx, auto done) {
      stub.async()->WatchAllocations(ctx, &request, &response, std::move(done));
    });
  }

  asio::awaitable<grpc::Status> update_allocations(const v1::UpdateAllocationsRequest& request) override {
    v1::UpdateAllocationsResponse response;
    co_return co_await call(options_.call_timeout,
                            [&](v1::ControlPlane::Stub& stub, grpc::ClientContext* ctx, auto done) {
                              stub.async()->UpdateAllocations(ctx, &request, &response, std::move(done));
                            });
  }

  asio::awaitable<grpc::Status> claim_volume(const v1::ClaimVolumeRequest& request,
                                             v1::ClaimVolumeResponse& response) override {
    // A claim may include a ControllerPublish on another node: allow it the CSI publish time.
    co_return co_await call(std::max(options_.call_timeout, std::chrono::milliseconds(std::chrono::seconds(60))),
                            [&](v1::ControlPlane::Stub& stub, grpc::ClientContext* ctx, auto done) {
                              stub.async()->ClaimVolume(ctx, &request, &response, std::move(done));
                            });
  }

  asio::awaitable<grpc::Status> unpublish_volume(const v1::UnpublishVolumeRequest& request) override {
    v1::UnpublishVolumeResponse response;
    co_return co_await call(options_.call_timeout,
                            [&](v1::ControlPlane::Stub& stub, grpc::ClientContext* ctx, auto done) {
                              stub.async()->UnpublishVolume(ctx, &request, &response, std::move(done));
                            });
  }

 private:
  asio::awaitable<grpc::Status> call(std::chrono::milliseconds timeout, ControlPlaneTarget::Start start) {
    auto st = co_await target_->call(timeout, std::move(start));
    if (options_.on_contact) options_.on_contact(answered(st));
    co_return st;
  }

  GrpcControlPlaneOptions options_;
  std::shared_ptr<ControlPlaneTarget> target_;
};

}  // namespace

std::shared_ptr<ControlPlaneTarget> make_controlplane_target(const std::string& addresses,
                                                             rpc::ChannelOptions channel) {
  return std::make_shared<ControlPlaneTarget>(split_controlplane_addrs(addresses), std::move(channel));
}

std::unique_ptr<ControlPlaneCalls> make_grpc_controlplane_calls(GrpcControlPlaneOptions options) {
  return std::make_unique<GrpcControlPlaneCalls>(std::move(options));
}

}  // namespace mooring::nodeagent
