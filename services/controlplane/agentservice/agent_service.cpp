// The gRPC face of the agent API: each method hands its request to a handler running as a
// coroutine on the store's executor (rpc::serve), so handlers never race the REST API.
#include "services/controlplane/agentservice/agent_service.hpp"

#include <grpcpp/support/server_callback.h>

#include <type_traits>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "services/controlplane/agentservice/handlers.hpp"
#include "services/controlplane/audit/audit_log.hpp"
#include "services/controlplane/nodes/liveness.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/rpc/server.hpp"
#include "shared/rpc/transport_security.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;

namespace {

// What a call names, for the audit log.
std::string audited_object(const v1::RegisterNodeRequest& r) { return r.node_id(); }
std::string audited_object(const v1::HeartbeatRequest& r) { return r.node_id(); }
std::string audited_object(const v1::WatchAllocationsRequest&) { return {}; }
std::string audited_object(const v1::UpdateAllocationsRequest& r) { return r.node_id(); }
std::string audited_object(const v1::ClaimVolumeRequest& r) { return r.volume_id(); }
std::string audited_object(const v1::UnpublishVolumeRequest& r) { return r.volume_id(); }
std::string audited_object(const v1::RenewCertificateRequest& r) { return r.node_id(); }
template <class Request>
std::string node_of(const Request& r) {
  return r.node_id();
}

class Service final : public v1::ControlPlane::CallbackService {
 public:
  explicit Service(agentservice::Context& ctx) : ctx_(ctx) {}

  grpc::ServerUnaryReactor* RegisterNode(grpc::CallbackServerContext* c, const v1::RegisterNodeRequest* req,
                                         v1::RegisterNodeResponse* resp) override {
    return serve(c, *req, "RegisterNode",
                 [this, req, resp](const agentservice::Caller& caller) -> asio::awaitable<grpc::Status> {
                   co_return agentservice::register_node(ctx_, *req, *resp, caller);
                 });
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* c, const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override {
    return serve(c, *req, "Heartbeat",
                 [this, req, resp](const agentservice::Caller& caller) -> asio::awaitable<grpc::Status> {
                   co_return agentservice::heartbeat(ctx_, *req, *resp, caller);
                 });
  }
  grpc::ServerUnaryReactor* WatchAllocations(grpc::CallbackServerContext* c, const v1::WatchAllocationsRequest* req,
                                             v1::WatchAllocationsResponse* resp) override {
    return serve(c, *req, "WatchAllocations",
                 [this, req, resp](const agentservice::Caller&) -> asio::awaitable<grpc::Status> {
                   co_return co_await agentservice::watch_allocations(ctx_, *req, *resp);
                 });
  }
  grpc::ServerUnaryReactor* UpdateAllocations(grpc::CallbackServerContext* c, const v1::UpdateAllocationsRequest* req,
                                              v1::UpdateAllocationsResponse* resp) override {
    return serve(c, *req, "UpdateAllocations",
                 [this, req, resp](const agentservice::Caller&) -> asio::awaitable<grpc::Status> {
                   co_return agentservice::update_allocations(ctx_, *req, *resp);
                 });
  }
  grpc::ServerUnaryReactor* ClaimVolume(grpc::CallbackServerContext* c, const v1::ClaimVolumeRequest* req,
                                        v1::ClaimVolumeResponse* resp) override {
    return serve(c, *req, "ClaimVolume",
                 [this, req, resp](const agentservice::Caller&) -> asio::awaitable<grpc::Status> {
                   co_return co_await agentservice::claim_volume(ctx_, *req, *resp);
                 });
  }
  grpc::ServerUnaryReactor* UnpublishVolume(grpc::CallbackServerContext* c, const v1::UnpublishVolumeRequest* req,
                                            v1::UnpublishVolumeResponse* resp) override {
    return serve(c, *req, "UnpublishVolume",
                 [this, req, resp](const agentservice::Caller&) -> asio::awaitable<grpc::Status> {
                   co_return agentservice::unpublish_volume(ctx_, *req, *resp);
                 });
  }
  grpc::ServerUnaryReactor* RenewCertificate(grpc::CallbackServerContext* c, const v1::RenewCertificateRequest* req,
                                             v1::RenewCertificateResponse* resp) override {
    return serve(c, *req, "RenewCertificate",
                 [this, req, resp](const agentservice::Caller& caller) -> asio::awaitable<grpc::Status> {
                   co_return agentservice::renew_certificate(ctx_, *req, *resp, caller);
                 });
  }

 private:
  // Every answer waits until the state it may reflect is durable (group commit), so an agent
  // never acts on a claim or an acknowledgement that a crash could take back.
  // With mutual TLS, the caller's certificate must allow the request (check_caller) first.
  template <class Request, class Handler>
  grpc::ServerUnaryReactor* serve(grpc::CallbackServerContext* c, const Request& req, const char* name,
                                  Handler handler) {
    agentservice::Caller caller;
    if (ctx_.options.require_node_identity) {
      auto peer = rpc::peer_certificate(*c);
      caller.checked = true;
      caller.subject = peer.tls ? peer.subject : "(no TLS)";
      if (peer.identity && peer.identity->role == tls::Role::agent) caller.node_id = peer.identity->node_id;
      caller.certificate = std::move(peer.pem);
    }
    return rpc::serve(ctx_.executor, c, name,
                      [this, &req, name, remote = c->peer(), caller = std::move(caller), handler = std::move(handler),
                       c]() -> asio::awaitable<grpc::Status> {
                        if (ctx_.options.standby) {
                          if (auto leader = ctx_.options.standby()) {
                            if (!leader->empty()) c->AddTrailingMetadata("x-mooring-leader", *leader);
                            co_return grpc::Status(
                                grpc::StatusCode::UNAVAILABLE,
                                leader->empty() ? "this control plane is a standby and no leader is elected yet; retry"
                                                : "this control plane is a standby; the leader is at " + *leader);
                          }
                        }
                        if (ctx_.options.hold) {
                          if (auto why = co_await ctx_.options.hold())
                            co_return grpc::Status(grpc::StatusCode::UNAVAILABLE, *why);
                        }
                        if (ctx_.options.writes_refused) {
                          if (auto why = ctx_.options.writes_refused())
                            co_return grpc::Status(grpc::StatusCode::UNAVAILABLE, *why);
                        }
                        grpc::Status status = co_await answer(caller, req, handler);
                        if constexpr (std::is_same_v<Request, v1::HeartbeatRequest>)
                          ctx_.liveness.answered(req.node_id());
                        audit(name, remote, caller, req, status);
                        co_return status;
                      });
  }

  template <class Request, class Handler>
  asio::awaitable<grpc::Status> answer(agentservice::Caller caller, const Request& req, Handler& handler) {
    // Which of the node's certificates this is decides whether it acts (on the executor: the
    // parse is cached there).
    if (caller.checked) caller.presented = agentservice::presented_certificate(ctx_, caller.certificate);
    if (auto st = agentservice::check_caller(ctx_, caller, req); !st.ok()) co_return st;
    const auto failed_flushes = ctx_.store.failed_flushes();
    grpc::Status status = co_await handler(caller);
    if (auto st = co_await ctx_.store.durable_since(failed_flushes); !st)
      co_return grpc::Status(grpc::StatusCode::UNAVAILABLE, "control plane: " + st.error());
    co_return status;
  }

  template <class Request>
  void audit(std::string_view name, const std::string& remote, const agentservice::Caller& caller, const Request& req,
             const grpc::Status& status) {
    if (!ctx_.options.audit || name == "WatchAllocations") return;
    if (name == "Heartbeat" && status.error_code() != grpc::StatusCode::PERMISSION_DENIED &&
        status.error_code() != grpc::StatusCode::UNAUTHENTICATED)
      return;
    // Under mutual TLS the node is the certificate's; in plaintext only what the call claims.
    const std::string node = caller.checked ? caller.node_id : node_of(req);
    ctx_.options.audit->record({.transport = "grpc",
                                .actor_type = node.empty() ? "anonymous" : "node",
                                .actor = node,
                                .remote = remote,
                                .method = std::string(name),
                                .object = audited_object(req),
                                .status = static_cast<unsigned>(status.error_code())});
  }

  agentservice::Context& ctx_;
};

}  // namespace

struct AgentService::Impl {
  Impl(asio::any_io_executor ex, StateStore& store, NodeLiveness& liveness, ControllerPublisher* publisher,
       AgentServiceOptions options)
      : ctx(ex, store, liveness, publisher, options), service(ctx) {}
  agentservice::Context ctx;
  Service service;
};

AgentService::AgentService(asio::any_io_executor executor, StateStore& store, NodeLiveness& liveness,
                           ControllerPublisher* publisher, AgentServiceOptions options)
    : impl_(std::make_unique<Impl>(std::move(executor), store, liveness, publisher, options)) {}

AgentService::~AgentService() = default;

grpc::Service* AgentService::service() { return &impl_->service; }

}  // namespace mooring::controlplane
