#include "services/nodeagent/rpcserver/nodeagent_service.hpp"

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include "mooring/v1/nodeagent.grpc.pb.h"
#include "services/nodeagent/plugins/plugin_manager.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "services/nodeagent/volumes/volume_manager.hpp"
#include "shared/domain/ids.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/log/log.hpp"
#include "shared/rpc/csi_client.hpp"
#include "shared/rpc/server.hpp"
#include "shared/rpc/transport_security.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace v1 = ::mooring::v1;
using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
using grpc::Status;
using grpc::StatusCode;

const log::Logger& logger() {
  static const log::Logger l{"nodeagent-service"};
  return l;
}

class NodeAgentService final : public v1::NodeAgent::CallbackService {
 public:
  NodeAgentService(asio::any_io_executor ex, NodeAgentServiceDeps deps) : ex_(std::move(ex)), d_(deps) {}

  ServerUnaryReactor* NodeDetachVolume(CallbackServerContext* ctx, const v1::NodeDetachVolumeRequest* req,
                                       v1::NodeDetachVolumeResponse*) override {
    return serve(ctx, "NodeDetachVolume", [this, req]() -> asio::awaitable<Status> {
      if (auto st = domain::validate_volume_key(req->volume_id()); !st)
        co_return Status(StatusCode::INVALID_ARGUMENT, st.error());
      if (!req->alloc_id().empty()) {
        if (auto st = domain::validate_allocation_id(req->alloc_id()); !st)
          co_return Status(StatusCode::INVALID_ARGUMENT, st.error());
      }
      const auto result = co_await d_.volumes.detach(req->volume_id(), req->alloc_id());
      if (!result.ok()) {
        logger().warn("node detach failed", {{"volume", req->volume_id()}, {"alloc", req->alloc_id()},
                                             {"error", result.error}});
        // Retryable from the control plane's point of view: the plugin may come back.
        co_return Status(StatusCode::UNAVAILABLE, "node " + d_.node_id + ": " + result.error);
      }
      co_return Status::OK;
    });
  }

  ServerUnaryReactor* NodeExpandVolume(CallbackServerContext* ctx, const v1::NodeExpandVolumeRequest* req,
                                       v1::NodeExpandVolumeResponse* resp) override {
    return serve(ctx, "NodeExpandVolume", [this, req, resp]() -> asio::awaitable<Status> {
      std::map<std::string, std::string> secrets(req->secrets().begin(), req->secrets().end());
      auto result = co_await d_.volumes.expand(req->volume_id(), req->alloc_id(), req->external_id(),
                                               req->capacity_range(), std::move(secrets));
      if (!result.ok()) co_return Status(result.code, "node " + d_.node_id + ": " + result.error);
      resp->set_capacity_bytes(result.capacity_bytes);
      co_return Status::OK;
    });
  }

  ServerUnaryReactor* NodeVolumeStats(CallbackServerContext* ctx, const v1::NodeVolumeStatsRequest* req,
                                      v1::NodeVolumeStatsResponse* resp) override {
    return serve(ctx, "NodeVolumeStats", [this, req, resp]() -> asio::awaitable<Status> {
      if (auto st = domain::validate_volume_key(req->volume_id()); !st)
        co_return Status(StatusCode::INVALID_ARGUMENT, st.error());
      const auto reports = co_await d_.volumes.stats_of(req->volume_id());
      for (const auto& r : reports) *resp->add_stats() = domain::to_proto(r);
      co_return Status::OK;
    });
  }

#define MOORING_FORWARD(Method, method_fn)                                                                   \
  ServerUnaryReactor* Method(CallbackServerContext* ctx, const v1::Method##Request* req,                    \
                             ::csi::v1::Method##Response* resp) override {                                  \
    return serve(ctx, #Method, [this, req, resp]() -> asio::awaitable<Status> {                   \
      auto client = d_.plugins.healthy_client(PluginKind::controller, req->plugin_id());                    \
      if (!client) co_return not_running(req->plugin_id());                                                 \
      auto result = co_await client->method_fn(req->request());                                             \
      if (result.ok()) *resp = std::move(result.response);                                                  \
      co_return result.status;                                                                              \
    });                                                                                                     \
  }

  MOORING_FORWARD(ControllerPublishVolume, controller_publish_volume)
  MOORING_FORWARD(ControllerUnpublishVolume, controller_unpublish_volume)
  MOORING_FORWARD(ValidateVolumeCapabilities, validate_volume_capabilities)
  MOORING_FORWARD(CreateVolume, create_volume)
  MOORING_FORWARD(DeleteVolume, delete_volume)
  MOORING_FORWARD(ControllerExpandVolume, controller_expand_volume)
  MOORING_FORWARD(CreateSnapshot, create_snapshot)
  MOORING_FORWARD(DeleteSnapshot, delete_snapshot)
  MOORING_FORWARD(ListSnapshots, list_snapshots)
  MOORING_FORWARD(ListVolumes, list_volumes)
  MOORING_FORWARD(GetCapacity, get_capacity)
  MOORING_FORWARD(CreateVolumeGroupSnapshot, create_volume_group_snapshot)
  MOORING_FORWARD(DeleteVolumeGroupSnapshot, delete_volume_group_snapshot)
  MOORING_FORWARD(GetVolumeGroupSnapshot, get_volume_group_snapshot)
#undef MOORING_FORWARD

 private:
  // With mutual TLS only the control plane may call: the handshake proved the caller holds a
  // certificate from our CA; its identity must be the control plane's, not another node's.
  template <class Handler>
  ServerUnaryReactor* serve(CallbackServerContext* ctx, const char* method, Handler handler) {
    if (d_.require_controlplane) {
      const auto peer = rpc::peer_certificate(*ctx);
      if (!peer.identity || peer.identity->role != tls::Role::server) {
        logger().warn("call refused: the caller is not the control plane",
                      {{"method", method}, {"subject", peer.tls ? peer.subject : "(no TLS)"}});
        return rpc::serve(ex_, ctx, method, [subject = peer.subject]() -> asio::awaitable<Status> {
          co_return Status(StatusCode::PERMISSION_DENIED,
                           "only the control plane may call a node agent; certificate \"" + subject + "\" is not its");
        });
      }
    }
    return rpc::serve(ex_, ctx, method, std::move(handler));
  }

  Status not_running(const std::string& plugin_id) const {
    return Status(StatusCode::UNAVAILABLE, "plugin " + plugin_id + " not running on node " + d_.node_id);
  }

  asio::any_io_executor ex_;
  NodeAgentServiceDeps d_;
};

}  // namespace

std::unique_ptr<grpc::Service> make_nodeagent_service(asio::any_io_executor ex, NodeAgentServiceDeps deps) {
  return std::make_unique<NodeAgentService>(std::move(ex), deps);
}

}  // namespace mooring::nodeagent
