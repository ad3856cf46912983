#include "services/nodeagent/rpcserver/nodeagent_service.hpp"

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <map>
#include <type_traits>

#include "mooring/v1/nodeagent.grpc.pb.h"
#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/plugin_manager.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "services/nodeagent/rpcserver/leader_fence.hpp"
#include "services/nodeagent/rpcserver/operation_cache.hpp"
#include "services/nodeagent/volumes/volume_manager.hpp"
#include "shared/csi/published_check.hpp"
#include "shared/domain/ids.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/log/log.hpp"
#include "shared/metrics/families.hpp"
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

const log::Logger kLog{"nodeagent-service"};

class NodeAgentService final : public v1::NodeAgent::CallbackService {
 public:
  NodeAgentService(asio::any_io_executor ex, NodeAgentServiceDeps deps) : ex_(std::move(ex)), d_(deps) {
    if (auto* f = metrics::families(); f && f->csi_calls_deduplicated_total)
      for (const char* method : {"ControllerPublishVolume", "ControllerUnpublishVolume"})
        for (const char* how : {"joined", "cached", "resolved"})
          deduplicated_[std::string(method) + " " + how] =
              f->csi_calls_deduplicated_total.with({{"method", method}, {"how", how}});
  }

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
        kLog.warn("node detach failed",
                  {{"volume", req->volume_id()}, {"alloc", req->alloc_id()}, {"error", result.error}});
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

#define MOORING_FORWARD(Method, method_fn)                                                          \
  ServerUnaryReactor* Method(CallbackServerContext* ctx, const v1::Method##Request* req,            \
                             ::csi::v1::Method##Response* resp) override {                          \
    return serve(ctx, #Method, [this, req, resp]() -> asio::awaitable<Status> {                     \
      auto client = d_.plugins.healthy_client(PluginKind::controller, req->plugin_id());            \
      if (!client) co_return not_running(req->plugin_id());                                         \
      if (const std::string* op = operation_id_of(*req); op && !op->empty() && d_.operations)       \
        co_return co_await once(                                                                    \
            csi::Rpc::Method, #Method, *req, *op, resp, std::move(client),                          \
            [](rpc::CsiClient& c, const ::csi::v1::Method##Request& r) { return c.method_fn(r); }); \
      auto result = co_await client->method_fn(req->request());                                     \
      if (result.ok()) *resp = std::move(result.response);                                          \
      co_return result.status;                                                                      \
    });                                                                                             \
  }

  MOORING_FORWARD(ControllerPublishVolume, controller_publish_volume)
  MOORING_FORWARD(ControllerUnpublishVolume, controller_unpublish_volume)
  MOORING_FORWARD(ControllerGetVolume, controller_get_volume)
  MOORING_FORWARD(ValidateVolumeCapabilities, validate_volume_capabilities)
  MOORING_FORWARD(CreateVolume, create_volume)
  MOORING_FORWARD(DeleteVolume, delete_volume)
  MOORING_FORWARD(ControllerExpandVolume, controller_expand_volume)
  MOORING_FORWARD(CreateSnapshot, create_snapshot)
  MOORING_FORWARD(DeleteSnapshot, delete_snapshot)
  MOORING_FORWARD(ListSnapshots, list_snapshots)
  MOORING_FORWARD(ListVolumes, list_volumes)
  MOORING_FORWARD(GetCapacity, get_capacity)
  MOORING_FORWARD(ControllerModifyVolume, controller_modify_volume)
  MOORING_FORWARD(GetSnapshot, get_snapshot)
  MOORING_FORWARD(CreateVolumeGroupSnapshot, create_volume_group_snapshot)
  MOORING_FORWARD(DeleteVolumeGroupSnapshot, delete_volume_group_snapshot)
  MOORING_FORWARD(GetVolumeGroupSnapshot, get_volume_group_snapshot)
#undef MOORING_FORWARD

 private:
  // The request's operation id; null for requests that carry none.
  template <class Wrapped>
  static const std::string* operation_id_of(const Wrapped& req) {
    if constexpr (requires { req.operation_id(); })
      return &req.operation_id();
    else
      return nullptr;
  }

  // A call with an operation id, through the cache: the plugin hears it once (OperationCache).
  // Kept: OK and "already done" answers (csi::is_done); anything else is asked again on repeat.
  template <class Wrapped, class Resp, class Invoke>
  asio::awaitable<Status> once(csi::Rpc rpc, const char* method, const Wrapped& req, const std::string& operation_id,
                               Resp* resp, std::shared_ptr<rpc::CsiClient> client, Invoke invoke) {
    using CsiReq = std::decay_t<decltype(req.request())>;
    auto request = std::make_shared<const CsiReq>(req.request());  // the call may outlive this handler
    OperationCache::Call call = [client, request, invoke]() -> asio::awaitable<OperationAnswer> {
      auto result = co_await invoke(*client, *request);
      OperationAnswer answer{result.status, {}};
      if (result.ok()) result.response.SerializeToString(&answer.response);
      co_return answer;
    };
    OperationCache::Keep keep = [rpc](const Status& st) { return csi::is_done(csi::classify(rpc, st.error_code())); };
    OperationCache::Resolve resolve;
    if constexpr (std::is_same_v<CsiReq, ::csi::v1::ControllerUnpublishVolumeRequest>)
      resolve = unpublished_check(req.plugin_id(), request, client);
    auto result = co_await d_.operations->run(req.plugin_id() + " " + operation_id, fingerprint(*request),
                                              std::move(call), std::move(keep), std::move(resolve));
    if (result.source != OperationCache::Source::plugin) {
      const char* how = result.source == OperationCache::Source::joined   ? "joined"
                        : result.source == OperationCache::Source::cached ? "cached"
                                                                          : "resolved";
      kLog.debug("controller call not repeated",
                 {{"method", method}, {"plugin_id", req.plugin_id()}, {"operation_id", operation_id}, {"how", how}});
      if (auto it = deduplicated_.find(std::string(method) + " " + how); it != deduplicated_.end()) it->second.inc();
    }
    if (result.answer.status.ok() && !resp->ParseFromString(result.answer.response))
      co_return Status(StatusCode::INTERNAL, std::string(method) + ": the kept answer could not be read");
    co_return result.answer.status;
  }

  // For an unpublish whose intent this agent recorded before a restart but not its result: the
  // plugin asked whether the volume is still published to the node (shared/csi/published_check,
  // as the control plane's resumed release asks). Not published: done, answered without the
  // call. Published, or the plugin cannot tell (no LIST_VOLUMES_PUBLISHED_NODES) or does not
  // answer: sent again (idempotent by CSI). Null when the plugin reports no published nodes.
  OperationCache::Resolve unpublished_check(const std::string& plugin_id,
                                            std::shared_ptr<const ::csi::v1::ControllerUnpublishVolumeRequest> request,
                                            std::shared_ptr<rpc::CsiClient> client) const {
    if (!d_.status) return {};
    const auto fp = d_.status->fingerprint(plugin_id, v1::PLUGIN_TYPE_CONTROLLER);
    if (!fp || !fp->controller_info().supports_list_volumes_attached_nodes()) return {};
    const bool get = fp->controller_info().supports_get(), list = fp->controller_info().supports_list_volumes();
    if (!get && !list) return {};
    return [get, list, plugin_id, request, client]() -> asio::awaitable<std::optional<OperationAnswer>> {
      auto not_reached = [](const Status& st) {
        return st.error_code() == StatusCode::UNAVAILABLE || st.error_code() == StatusCode::DEADLINE_EXCEEDED;
      };
      auto ask_get = [&]() -> asio::awaitable<csi::QueryAnswer<::csi::v1::ControllerGetVolumeResponse>> {
        ::csi::v1::ControllerGetVolumeRequest req;
        req.set_volume_id(request->volume_id());
        auto res = co_await client->controller_get_volume(req);
        co_return csi::QueryAnswer<::csi::v1::ControllerGetVolumeResponse>{
            res.ok(), not_reached(res.status), res.status.error_message(), std::move(res.response)};
      };
      auto ask_list = [&](std::string token) -> asio::awaitable<csi::QueryAnswer<::csi::v1::ListVolumesResponse>> {
        ::csi::v1::ListVolumesRequest req;
        req.set_starting_token(token);
        auto res = co_await client->list_volumes(req);
        co_return csi::QueryAnswer<::csi::v1::ListVolumesResponse>{res.ok(), not_reached(res.status),
                                                                   res.status.error_message(), std::move(res.response)};
      };
      auto check =
          co_await csi::published_to_node(get, list, request->volume_id(), request->node_id(), ask_get, ask_list);
      if (check.published == false) {
        kLog.info(
            "unpublish cut off by the agent restart: the volume is no longer published to the node; "
            "answered without calling the plugin again",
            {{"plugin_id", plugin_id}, {"volume_id", request->volume_id()}, {"csi_node_id", request->node_id()}});
        OperationAnswer done{Status::OK, {}};
        ::csi::v1::ControllerUnpublishVolumeResponse().SerializeToString(&done.response);
        co_return done;
      }
      for (const auto& note : check.notes)
        kLog.info("unpublish cut off by the agent restart: " + note, {{"volume_id", request->volume_id()}});
      co_return std::nullopt;
    };
  }

  // What a repeat must match to be answered from a kept result: the request without its secrets
  // (never kept, not even hashed), serialized deterministically (maps in key order).
  template <class CsiReq>
  static std::uint64_t fingerprint(const CsiReq& request) {
    CsiReq copy = request;
    if constexpr (requires { copy.clear_secrets(); }) copy.clear_secrets();
    std::string bytes;
    {
      google::protobuf::io::StringOutputStream out(&bytes);
      google::protobuf::io::CodedOutputStream coded(&out);
      coded.SetSerializationDeterministic(true);
      copy.SerializeToCodedStream(&coded);
    }
    return std::hash<std::string>{}(bytes);
  }

  // With mutual TLS only the control plane may call: the handshake proved the caller holds a
  // certificate from our CA; its identity must be the control plane's, not another node's.
  template <class Handler>
  ServerUnaryReactor* serve(CallbackServerContext* ctx, const char* method, Handler handler) {
    if (d_.require_controlplane) {
      const auto peer = rpc::peer_certificate(*ctx);
      if (!peer.identity || peer.identity->role != tls::Role::server) {
        kLog.warn("call refused: the caller is not the control plane",
                  {{"method", method}, {"subject", peer.tls ? peer.subject : "(no TLS)"}});
        return rpc::serve(ex_, ctx, method, [subject = peer.subject]() -> asio::awaitable<Status> {
          co_return Status(StatusCode::PERMISSION_DENIED,
                           "only the control plane may call a node agent; certificate \"" + subject + "\" is not its");
        });
      }
    }
    // The fencing token: a call from a control plane that no longer leads (a paused or cut-off
    // leader whose call waited in gRPC's queue) is refused before it reaches a plugin. ABORTED:
    // nothing was done, and a caller that still leads may send it again.
    if (d_.fence) {
      if (auto why = d_.fence->admit(leader_epoch_of(*ctx))) {
        kLog.warn("call refused: it does not come from the leader", {{"method", method}, {"reason", *why}});
        return rpc::serve(ex_, ctx, method, [why = std::move(*why)]() -> asio::awaitable<Status> {
          co_return Status(StatusCode::ABORTED, why);
        });
      }
    }
    return rpc::serve(ex_, ctx, method, std::move(handler));
  }

  // The caller's leader epoch (domain/leader_epoch.hpp); nullopt when it sent none or one that
  // does not parse (refused alike once the agent knows an epoch).
  static std::optional<domain::LeaderEpoch> leader_epoch_of(const CallbackServerContext& ctx) {
    const auto& md = ctx.client_metadata();
    const auto it = md.find(domain::kLeaderEpochHeader);
    if (it == md.end()) return std::nullopt;
    return domain::LeaderEpoch::parse(std::string_view(it->second.data(), it->second.size()));
  }

  Status not_running(const std::string& plugin_id) const {
    return Status(StatusCode::UNAVAILABLE, "plugin " + plugin_id + " not running on node " + d_.node_id);
  }

  asio::any_io_executor ex_;
  NodeAgentServiceDeps d_;
  std::map<std::string, metrics::Counter> deduplicated_;  // "<method> <how>"; empty with metrics off
};

}  // namespace

std::unique_ptr<grpc::Service> make_nodeagent_service(asio::any_io_executor ex, NodeAgentServiceDeps deps) {
  return std::make_unique<NodeAgentService>(std::move(ex), deps);
}

}  // namespace mooring::nodeagent
