#include "services/nodeagent/plugins/grpc_plugin_client.hpp"

#include "shared/rpc/csi_client.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;

class CsiPluginClient final : public PluginClient {
 public:
  explicit CsiPluginClient(std::shared_ptr<rpc::CsiClient> client) : client_(std::move(client)) {}

  asio::awaitable<grpc::Status> get_plugin_info(::csi::v1::GetPluginInfoResponse& out) override {
    if (!closed_.empty()) co_return closed_status();
    ::csi::v1::GetPluginInfoRequest request;  // in this frame: it must outlive the call
    co_return take(co_await client_->get_plugin_info(request), out);
  }
  asio::awaitable<grpc::Status> get_plugin_capabilities(::csi::v1::GetPluginCapabilitiesResponse& out) override {
    if (!closed_.empty()) co_return closed_status();
    ::csi::v1::GetPluginCapabilitiesRequest request;  // in this frame: it must outlive the call
    co_return take(co_await client_->get_plugin_capabilities(request), out);
  }
  asio::awaitable<grpc::Status> probe(::csi::v1::ProbeResponse& out) override {
    if (!closed_.empty()) co_return closed_status();
    ::csi::v1::ProbeRequest request;  // in this frame: it must outlive the call
    co_return take(co_await client_->probe(request), out);
  }
  asio::awaitable<grpc::Status> controller_get_capabilities(::csi::v1::ControllerGetCapabilitiesResponse& out) override {
    if (!closed_.empty()) co_return closed_status();
    ::csi::v1::ControllerGetCapabilitiesRequest request;  // in this frame: it must outlive the call
    co_return take(co_await client_->controller_get_capabilities(request), out);
  }
  asio::awaitable<grpc::Status> node_get_capabilities(::csi::v1::NodeGetCapabilitiesResponse& out) override {
    if (!closed_.empty()) co_return closed_status();
    ::csi::v1::NodeGetCapabilitiesRequest request;  // in this frame: it must outlive the call
    co_return take(co_await client_->node_get_capabilities(request), out);
  }
  asio::awaitable<grpc::Status> node_get_info(::csi::v1::NodeGetInfoResponse& out) override {
    if (!closed_.empty()) co_return closed_status();
    ::csi::v1::NodeGetInfoRequest request;  // in this frame: it must outlive the call
    co_return take(co_await client_->node_get_info(request), out);
  }
  // Only this adapter is closed: the shared client stays usable for its other users.
  void close(std::string reason) override { closed_ = std::move(reason); }

 private:
  grpc::Status closed_status() const {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin client closed: " + closed_);
  }
  template <class Response>
  static grpc::Status take(rpc::CsiResult<Response> result, Response& out) {
    if (result.ok()) out = std::move(result.response);
    return result.status;
  }

  std::shared_ptr<rpc::CsiClient> client_;
  std::string closed_;
};

}  // namespace

std::unique_ptr<PluginClient> make_plugin_client(std::shared_ptr<rpc::CsiClient> client) {
  return std::make_unique<CsiPluginClient>(std::move(client));
}

std::unique_ptr<PluginClient> make_grpc_plugin_client(asio::any_io_executor ex, const std::string& socket_path) {
  return make_plugin_client(std::make_shared<rpc::CsiClient>(ex, socket_path));
}

}  // namespace mooring::nodeagent
