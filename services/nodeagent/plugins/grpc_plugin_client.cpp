#include "services/nodeagent/plugins/grpc_plugin_client.hpp"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "csi/v1/csi.grpc.pb.h"
#include "shared/csi/error_table.hpp"
#include "shared/rpc/channel.hpp"
#include "shared/rpc/client_call.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using csi::Rpc;

class GrpcPluginClient final : public PluginClient {
 public:
  explicit GrpcPluginClient(const std::string& socket_path)
      : channel_(rpc::make_channel(socket_path)),
        identity_(::csi::v1::Identity::NewStub(channel_)),
        controller_(::csi::v1::Controller::NewStub(channel_)),
        node_(::csi::v1::Node::NewStub(channel_)) {}

  asio::awaitable<grpc::Status> get_plugin_info(::csi::v1::GetPluginInfoResponse& out) override {
    ::csi::v1::GetPluginInfoRequest req;
    co_return co_await call(Rpc::GetPluginInfo, [&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      identity_->async()->GetPluginInfo(ctx, &req, &out, std::move(done));
    });
  }
  asio::awaitable<grpc::Status> get_plugin_capabilities(::csi::v1::GetPluginCapabilitiesResponse& out) override {
    ::csi::v1::GetPluginCapabilitiesRequest req;
    co_return co_await call(Rpc::GetPluginCapabilities, [&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      identity_->async()->GetPluginCapabilities(ctx, &req, &out, std::move(done));
    });
  }
  asio::awaitable<grpc::Status> probe(::csi::v1::ProbeResponse& out) override {
    ::csi::v1::ProbeRequest req;
    co_return co_await call(Rpc::Probe, [&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      identity_->async()->Probe(ctx, &req, &out, std::move(done));
    });
  }
  asio::awaitable<grpc::Status> controller_get_capabilities(
      ::csi::v1::ControllerGetCapabilitiesResponse& out) override {
    ::csi::v1::ControllerGetCapabilitiesRequest req;
    co_return co_await call(Rpc::ControllerGetCapabilities, [&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      controller_->async()->ControllerGetCapabilities(ctx, &req, &out, std::move(done));
    });
  }
  asio::awaitable<grpc::Status> node_get_capabilities(::csi::v1::NodeGetCapabilitiesResponse& out) override {
    ::csi::v1::NodeGetCapabilitiesRequest req;
    co_return co_await call(Rpc::NodeGetCapabilities, [&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      node_->async()->NodeGetCapabilities(ctx, &req, &out, std::move(done));
    });
  }
  asio::awaitable<grpc::Status> node_get_info(::csi::v1::NodeGetInfoResponse& out) override {
    ::csi::v1::NodeGetInfoRequest req;
    co_return co_await call(Rpc::NodeGetInfo, [&](grpc::ClientContext* ctx, rpc::UnaryDone done) {
      node_->async()->NodeGetInfo(ctx, &req, &out, std::move(done));
    });
  }
  void close(std::string reason) override { closed_ = std::move(reason); }

 private:
  asio::awaitable<grpc::Status> call(Rpc which, rpc::StartUnary start) {
    if (!closed_.empty()) co_return grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin client closed: " + closed_);
    // Identity/capability calls answer from memory: fail fast while the socket is not
    // accepting rather than queueing until the deadline.
    co_return co_await rpc::unary(rpc::CallOptions{csi::policy(which).timeout, false}, std::move(start));
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<::csi::v1::Identity::Stub> identity_;
  std::unique_ptr<::csi::v1::Controller::Stub> controller_;
  std::unique_ptr<::csi::v1::Node::Stub> node_;
  std::string closed_;
};

}  // namespace

std::unique_ptr<PluginClient> make_grpc_plugin_client(const std::string& socket_path) {
  return std::make_unique<GrpcPluginClient>(socket_path);
}

}  // namespace mooring::nodeagent
