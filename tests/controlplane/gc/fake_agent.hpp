// Test support for the GC and the agent router: a fake node agent (the NodeAgent gRPC service)
// answering the two release RPCs, NodeDetachVolume and ControllerUnpublishVolume,
// ControllerPublishVolume (publish context {"device": "/dev/fake/<external id>"}) and
// ControllerGetVolume (published nodes as set with set_published). It records
// every call with its timing and can fail or delay any method; other methods are UNIMPLEMENTED.
// (The controller endpoints are tested end to end, with the real hostpath plugin.)
// Handlers are coroutines on the fake's own io thread; the recorded data is mutex-protected.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "mooring/v1/nodeagent.grpc.pb.h"
#include "shared/async/sleep.hpp"
#include "shared/rpc/server.hpp"
#include "shared/rpc/transport_security.hpp"

namespace mooring::controlplane::testing {

namespace asio = boost::asio;

struct AgentCall {
  std::string method;
  std::string plugin_id;
  std::string volume_id;      // the CSI volume id (external) for controller calls; Mooring id for node calls
  std::string node_id;        // CSI node id (controller publish/unpublish)
  std::string alloc_id;       // node detach
  std::map<std::string, std::string> secrets;
  std::string detail;         // method-specific (content source, capacity, ...)
  std::string operation_id;   // controller publish/unpublish
  std::string leader_epoch;   // the call's mooring-leader-epoch metadata, "" when it carried none
  std::chrono::steady_clock::time_point start, end;
};

struct Failure {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
  int remaining = -1;  // -1: forever
};

class FakeAgent final : public mooring::v1::NodeAgent::CallbackService {
 public:
  explicit FakeAgent(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  void fail(const std::string& method, grpc::StatusCode code, std::string message, int times = -1) {
    std::lock_guard lock(mu_);
    failures_[method] = Failure{code, std::move(message), times};
  }
  void heal(const std::string& method) {
    std::lock_guard lock(mu_);
    failures_.erase(method);
  }
  void delay(const std::string& method, std::chrono::milliseconds d) {
    std::lock_guard lock(mu_);
    delays_[method] = d;
  }
  std::vector<AgentCall> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::vector<AgentCall> calls(const std::string& method) const {
    std::lock_guard lock(mu_);
    std::vector<AgentCall> out;
    for (const auto& c : calls_)
      if (c.method == method) out.push_back(c);
    return out;
  }
  std::size_t count(const std::string& method) const { return calls(method).size(); }
  // ControllerGetVolume of `external_id` answers these published CSI node ids (NOT_FOUND if unset).
  void set_published(const std::string& external_id, std::vector<std::string> csi_node_ids) {
    std::lock_guard lock(mu_);
    published_[external_id] = std::move(csi_node_ids);
  }
  // Largest number of calls of `method` in flight at once (over all volumes / for one volume).
  int max_in_flight(const std::string& method) const {
    std::lock_guard lock(mu_);
    auto it = max_in_flight_.find(method);
    return it == max_in_flight_.end() ? 0 : it->second;
  }
  int max_in_flight_per_volume() const { return max_per_volume_; }

  // ---- node RPCs ----
  grpc::ServerUnaryReactor* NodeDetachVolume(grpc::CallbackServerContext* ctx,
                                             const mooring::v1::NodeDetachVolumeRequest* req,
                                             mooring::v1::NodeDetachVolumeResponse*) override {
    AgentCall c{.method = "NodeDetachVolume", .plugin_id = req->plugin_id(), .volume_id = req->volume_id(),
                .alloc_id = req->alloc_id()};
    c.detail = std::to_string(static_cast<int>(req->access_mode()));
    return run(ctx, std::move(c), [] { return grpc::Status::OK; });
  }
  grpc::ServerUnaryReactor* ControllerUnpublishVolume(grpc::CallbackServerContext* ctx,
                                                      const mooring::v1::ControllerUnpublishVolumeRequest* req,
                                                      ::csi::v1::ControllerUnpublishVolumeResponse*) override {
    AgentCall c{.method = "ControllerUnpublishVolume", .plugin_id = req->plugin_id(),
                .volume_id = req->request().volume_id(), .node_id = req->request().node_id()};
    c.secrets = {req->request().secrets().begin(), req->request().secrets().end()};
    c.operation_id = req->operation_id();
    return run(ctx, std::move(c), [] { return grpc::Status::OK; });
  }
  grpc::ServerUnaryReactor* ControllerPublishVolume(grpc::CallbackServerContext* ctx,
                                                    const mooring::v1::ControllerPublishVolumeRequest* req,
                                                    ::csi::v1::ControllerPublishVolumeResponse* resp) override {
    AgentCall c{.method = "ControllerPublishVolume", .plugin_id = req->plugin_id(),
                .volume_id = req->request().volume_id(), .node_id = req->request().node_id()};
    c.operation_id = req->operation_id();
    return run(ctx, std::move(c), [resp, id = req->request().volume_id()] {
      (*resp->mutable_publish_context())["device"] = "/dev/fake/" + id;
      return grpc::Status::OK;
    });
  }
  grpc::ServerUnaryReactor* ControllerGetVolume(grpc::CallbackServerContext* ctx,
                                                const mooring::v1::ControllerGetVolumeRequest* req,
                                                ::csi::v1::ControllerGetVolumeResponse* resp) override {
    AgentCall c{.method = "ControllerGetVolume", .plugin_id = req->plugin_id(), .volume_id = req->request().volume_id()};
    return run(ctx, std::move(c), [this, resp, id = req->request().volume_id()] {
      std::lock_guard lock(mu_);
      auto it = published_.find(id);
      if (it == published_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "volume " + id + " not found");
      resp->mutable_volume()->set_volume_id(id);
      resp->mutable_status();  // present even when published nowhere
      for (const auto& n : it->second) resp->mutable_status()->add_published_node_ids(n);
      return grpc::Status::OK;
    });
  }

 private:
  template <class Body>
  grpc::ServerUnaryReactor* run(grpc::CallbackServerContext* ctx, AgentCall call, Body body) {
    if (auto it = ctx->client_metadata().find("mooring-leader-epoch"); it != ctx->client_metadata().end())
      call.leader_epoch.assign(it->second.data(), it->second.size());
    return rpc::serve(ex_, ctx, call.method, [this, call = std::move(call), body]() mutable -> asio::awaitable<grpc::Status> {
      call.start = std::chrono::steady_clock::now();
      std::chrono::milliseconds wait{0};
      std::optional<Failure> failure;
      {
        std::lock_guard lock(mu_);
        auto& n = in_flight_[call.method];
        max_in_flight_[call.method] = std::max(max_in_flight_[call.method], ++n);
        auto& pv = per_volume_[call.volume_id];
        max_per_volume_ = std::max(max_per_volume_, ++pv);
        if (auto d = delays_.find(call.method); d != delays_.end()) wait = d->second;
        if (auto f = failures_.find(call.method); f != failures_.end() && f->second.remaining != 0) {
          failure = f->second;
          if (f->second.remaining > 0) --f->second.remaining;
        }
      }
      if (wait.count() > 0) co_await async::sleep_for(wait);
      grpc::Status status = failure ? grpc::Status(failure->code, failure->message) : body();
      std::lock_guard lock(mu_);
      --in_flight_[call.method];
      --per_volume_[call.volume_id];
      call.end = std::chrono::steady_clock::now();
      call.detail += failure ? " -> " + std::to_string(static_cast<int>(failure->code)) : "";
      calls_.push_back(std::move(call));
      co_return status;
    });
  }

  asio::any_io_executor ex_;
  mutable std::mutex mu_;
  std::vector<AgentCall> calls_;
  std::map<std::string, Failure> failures_;
  std::map<std::string, std::vector<std::string>> published_;
  std::map<std::string, std::chrono::milliseconds> delays_;
  std::map<std::string, int> in_flight_;
  std::map<std::string, int> max_in_flight_;
  std::map<std::string, int> per_volume_;
  int max_per_volume_ = 0;
};

// Several fake agents, each a gRPC server on 127.0.0.1:<OS port>, on one server io thread.
class FakeAgents {
 public:
  FakeAgents() : work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~FakeAgents() {
    for (auto& [id, s] : servers_) stop(id);
    work_.reset();
    io_.stop();
    thread_.join();
  }

  // Starts the agent of `node` and returns its address "127.0.0.1:port" (any free port, or the
  // one `address` names: an agent back where it was). `security`: serve mutual TLS with that
  // certificate (rpc/transport_security.hpp).
  std::string start(const std::string& node, std::shared_ptr<const rpc::TransportSecurity> security = nullptr,
                    const std::string& address = "127.0.0.1:0") {
    if (!agents_.count(node)) agents_[node] = std::make_unique<FakeAgent>(io_.get_executor());
    stop(node);
    std::string error;
    auto server = rpc::Server::start(
        rpc::ServerOptions{.address = address, .services = {agents_[node].get()}, .security = std::move(security)},
        error);
    if (!server) throw std::runtime_error("fake agent: " + error);
    std::string listening = "127.0.0.1:" + std::to_string(server->port());
    servers_[node] = std::move(server);
    return listening;
  }
  // Stops the agent's server (the agent's records stay).
  void stop(const std::string& node) {
    auto it = servers_.find(node);
    if (it == servers_.end() || !it->second) return;
    it->second->shutdown_blocking(std::chrono::milliseconds(200));
    it->second.reset();
  }
  FakeAgent& operator[](const std::string& node) { return *agents_.at(node); }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::map<std::string, std::unique_ptr<FakeAgent>> agents_;
  std::map<std::string, std::unique_ptr<rpc::Server>> servers_;
  std::thread thread_;
};

}  // namespace mooring::controlplane::testing
