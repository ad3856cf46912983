// Test support for the GC and controller endpoints: a fake node agent (the NodeAgent gRPC
// service) that records every call with its timing, can fail or delay any method, and keeps
// the volumes and snapshots it "created" so list calls have something to page through.
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

namespace mooring::controlplane::testing {

namespace asio = boost::asio;

struct AgentCall {
  std::string method;
  std::string plugin_id;
  std::string volume_id;      // the CSI volume id (external) for controller calls; Mooring id for node calls
  std::string node_id;        // CSI node id (controller publish/unpublish)
  std::string alloc_id;       // node detach
  std::string name;           // create volume/snapshot name
  std::map<std::string, std::string> secrets;
  std::string detail;         // method-specific (content source, capacity, ...)
  std::chrono::steady_clock::time_point start, end;
};

struct Failure {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
  int remaining = -1;  // -1: forever
};

class FakeAgent final : public mooring::v1::NodeAgent::CallbackService {
 public:
  using Csi = ::csi::v1::CreateVolumeRequest;

  FakeAgent(asio::any_io_executor ex, std::string node) : ex_(std::move(ex)), node_(std::move(node)) {}

  const std::string& node() const { return node_; }

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
  // Largest number of calls of `method` in flight at once (over all volumes / for one volume).
  int max_in_flight(const std::string& method) const {
    std::lock_guard lock(mu_);
    auto it = max_in_flight_.find(method);
    return it == max_in_flight_.end() ? 0 : it->second;
  }
  int max_in_flight_per_volume() const { return max_per_volume_; }

  std::atomic<bool> node_expansion_required{false};
  std::atomic<std::int64_t> list_page_size{0};  // 0: the request's max_entries

  // ---- node RPCs ----
  grpc::ServerUnaryReactor* NodeDetachVolume(grpc::CallbackServerContext* ctx,
                                             const mooring::v1::NodeDetachVolumeRequest* req,
                                             mooring::v1::NodeDetachVolumeResponse*) override {
    AgentCall c{.method = "NodeDetachVolume", .plugin_id = req->plugin_id(), .volume_id = req->volume_id(),
                .alloc_id = req->alloc_id()};
    c.detail = std::to_string(static_cast<int>(req->access_mode()));
    return run(ctx, std::move(c), [] { return grpc::Status::OK; });
  }
  grpc::ServerUnaryReactor* NodeExpandVolume(grpc::CallbackServerContext* ctx,
                                             const mooring::v1::NodeExpandVolumeRequest* req,
                                             mooring::v1::NodeExpandVolumeResponse* resp) override {
    AgentCall c{.method = "NodeExpandVolume", .plugin_id = req->plugin_id(), .volume_id = req->volume_id(),
                .alloc_id = req->alloc_id()};
    c.detail = std::to_string(req->capacity_range().required_bytes());
    return run(ctx, std::move(c), [=] {
      resp->set_capacity_bytes(req->capacity_range().required_bytes());
      return grpc::Status::OK;
    });
  }

  // ---- controller RPCs ----
  grpc::ServerUnaryReactor* ControllerPublishVolume(grpc::CallbackServerContext* ctx,
                                                    const mooring::v1::ControllerPublishVolumeRequest* req,
                                                    ::csi::v1::ControllerPublishVolumeResponse* resp) override {
    AgentCall c{.method = "ControllerPublishVolume", .plugin_id = req->plugin_id(),
                .volume_id = req->request().volume_id(), .node_id = req->request().node_id()};
    c.secrets = {req->request().secrets().begin(), req->request().secrets().end()};
    return run(ctx, std::move(c), [=] {
      (*resp->mutable_publish_context())["device"] = "/dev/fake-" + req->request().volume_id();
      return grpc::Status::OK;
    });
  }
  grpc::ServerUnaryReactor* ControllerUnpublishVolume(grpc::CallbackServerContext* ctx,
                                                      const mooring::v1::ControllerUnpublishVolumeRequest* req,
                                                      ::csi::v1::ControllerUnpublishVolumeResponse*) override {
    AgentCall c{.method = "ControllerUnpublishVolume", .plugin_id = req->plugin_id(),
                .volume_id = req->request().volume_id(), .node_id = req->request().node_id()};
    c.secrets = {req->request().secrets().begin(), req->request().secrets().end()};
    return run(ctx, std::move(c), [] { return grpc::Status::OK; });
  }
  grpc::ServerUnaryReactor* ValidateVolumeCapabilities(grpc::CallbackServerContext* ctx,
                                                       const mooring::v1::ValidateVolumeCapabilitiesRequest* req,
                                                       ::csi::v1::ValidateVolumeCapabilitiesResponse*) override {
    return run(ctx, {.method = "ValidateVolumeCapabilities", .plugin_id = req->plugin_id(),
                     .volume_id = req->request().volume_id()},
               [] { return grpc::Status::OK; });
  }
  grpc::ServerUnaryReactor* CreateVolume(grpc::CallbackServerContext* ctx, const mooring::v1::CreateVolumeRequest* req,
                                         ::csi::v1::CreateVolumeResponse* resp) override {
    const auto& r = req->request();
    AgentCall c{.method = "CreateVolume", .plugin_id = req->plugin_id(), .name = r.name()};
    c.secrets = {r.secrets().begin(), r.secrets().end()};
    if (r.has_volume_content_source()) {
      const auto& src = r.volume_content_source();
      c.detail = src.has_snapshot() ? "snapshot:" + src.snapshot().snapshot_id() : "volume:" + src.volume().volume_id();
    }
    c.detail += " min=" + std::to_string(r.capacity_range().required_bytes()) +
                " max=" + std::to_string(r.capacity_range().limit_bytes()) +
                " params=" + std::to_string(r.parameters_size()) +
                " requisite=" + std::to_string(r.accessibility_requirements().requisite_size()) +
                " caps=" + std::to_string(r.volume_capabilities_size());
    return run(ctx, std::move(c), [=, this] {
      auto* v = resp->mutable_volume();
      v->set_volume_id("ext-" + r.name());
      v->set_capacity_bytes(r.capacity_range().required_bytes() ? r.capacity_range().required_bytes() : 1 << 20);
      (*v->mutable_volume_context())["created-by"] = "fake";
      if (r.accessibility_requirements().requisite_size() > 0)
        *v->add_accessible_topology() = r.accessibility_requirements().requisite(0);
      std::lock_guard lock(mu_);
      volumes_[v->volume_id()] = *v;
      return grpc::Status::OK;
    });
  }
  grpc::ServerUnaryReactor* DeleteVolume(grpc::CallbackServerContext* ctx, const mooring::v1::DeleteVolumeRequest* req,
                                         ::csi::v1::DeleteVolumeResponse*) override {
    AgentCall c{.method = "DeleteVolume", .plugin_id = req->plugin_id(), .volume_id = req->request().volume_id()};
    c.secrets = {req->request().secrets().begin(), req->request().secrets().end()};
    return run(ctx, std::move(c), [=, this] {
      std::lock_guard lock(mu_);
      volumes_.erase(req->request().volume_id());
      return grpc::Status::OK;
    });
  }
  grpc::ServerUnaryReactor* ControllerExpandVolume(grpc::CallbackServerContext* ctx,
                                                   const mooring::v1::ControllerExpandVolumeRequest* req,
                                                   ::csi::v1::ControllerExpandVolumeResponse* resp) override {
    AgentCall c{.method = "ControllerExpandVolume", .plugin_id = req->plugin_id(),
                .volume_id = req->request().volume_id()};
    c.detail = std::to_string(req->request().capacity_range().required_bytes());
    return run(ctx, std::move(c), [=, this] {
      resp->set_capacity_bytes(req->request().capacity_range().required_bytes());
      resp->set_node_expansion_required(node_expansion_required.load());
      return grpc::Status::OK;
    });
  }
  grpc::ServerUnaryReactor* CreateSnapshot(grpc::CallbackServerContext* ctx,
                                           const mooring::v1::CreateSnapshotRequest* req,
                                           ::csi::v1::CreateSnapshotResponse* resp) override {
    const auto& r = req->request();
    AgentCall c{.method = "CreateSnapshot", .plugin_id = req->plugin_id(), .volume_id = r.source_volume_id(),
                .name = r.name()};
    c.secrets = {r.secrets().begin(), r.secrets().end()};
    return run(ctx, std::move(c), [=, this] {
      auto* s = resp->mutable_snapshot();
      s->set_snapshot_id("snap-" + r.name());
      s->set_source_volume_id(r.source_volume_id());
      s->set_size_bytes(4096);
      s->set_ready_to_use(true);
      s->mutable_creation_time()->set_seconds(1700000000);
      std::lock_guard lock(mu_);
      snapshots_[s->snapshot_id()] = *s;
      return grpc::Status::OK;
    });
  }
  grpc::ServerUnaryReactor* DeleteSnapshot(grpc::CallbackServerContext* ctx,
                                           const mooring::v1::DeleteSnapshotRequest* req,
                                           ::csi::v1::DeleteSnapshotResponse*) override {
    AgentCall c{.method = "DeleteSnapshot", .plugin_id = req->plugin_id(), .name = req->request().snapshot_id()};
    c.secrets = {req->request().secrets().begin(), req->request().secrets().end()};
    return run(ctx, std::move(c), [=, this] {
      std::lock_guard lock(mu_);
      snapshots_.erase(req->request().snapshot_id());
      return grpc::Status::OK;
    });
  }
  grpc::ServerUnaryReactor* ListSnapshots(grpc::CallbackServerContext* ctx, const mooring::v1::ListSnapshotsRequest* req,
                                          ::csi::v1::ListSnapshotsResponse* resp) override {
    return run(ctx, {.method = "ListSnapshots", .plugin_id = req->plugin_id(), .detail = req->request().starting_token()},
               [=, this] {
                 std::lock_guard lock(mu_);
                 return page(snapshots_, req->request().starting_token(), req->request().max_entries(),
                             [&](const ::csi::v1::Snapshot& s) { *resp->add_entries()->mutable_snapshot() = s; },
                             [&](const std::string& t) { resp->set_next_token(t); });
               });
  }
  grpc::ServerUnaryReactor* ListVolumes(grpc::CallbackServerContext* ctx, const mooring::v1::ListVolumesRequest* req,
                                        ::csi::v1::ListVolumesResponse* resp) override {
    return run(ctx, {.method = "ListVolumes", .plugin_id = req->plugin_id(), .detail = req->request().starting_token()},
               [=, this] {
                 std::lock_guard lock(mu_);
                 return page(volumes_, req->request().starting_token(), req->request().max_entries(),
                             [&](const ::csi::v1::Volume& v) { *resp->add_entries()->mutable_volume() = v; },
                             [&](const std::string& t) { resp->set_next_token(t); });
               });
  }
  grpc::ServerUnaryReactor* GetCapacity(grpc::CallbackServerContext* ctx, const mooring::v1::GetCapacityRequest* req,
                                        ::csi::v1::GetCapacityResponse* resp) override {
    return run(ctx, {.method = "GetCapacity", .plugin_id = req->plugin_id()}, [=] {
      resp->set_available_capacity(1 << 30);
      return grpc::Status::OK;
    });
  }

  // Adds a volume the plugin knows without a CreateVolume (for ListVolumes).
  void add_external_volume(const std::string& id, std::int64_t capacity) {
    std::lock_guard lock(mu_);
    ::csi::v1::Volume v;
    v.set_volume_id(id);
    v.set_capacity_bytes(capacity);
    volumes_[id] = v;
  }

 private:
  template <class Map, class Add, class SetToken>
  grpc::Status page(const Map& items, const std::string& token, std::int32_t max_entries, Add add, SetToken set_token) {
    std::int64_t size = list_page_size.load() ? list_page_size.load() : max_entries;
    auto it = token.empty() ? items.begin() : items.lower_bound(token);
    if (!token.empty() && (it == items.end() || it->first != token))
      return grpc::Status(grpc::StatusCode::ABORTED, "unknown starting_token " + token);
    std::int64_t n = 0;
    for (; it != items.end(); ++it) {
      if (size > 0 && n == size) {
        set_token(it->first);
        break;
      }
      add(it->second);
      ++n;
    }
    return grpc::Status::OK;
  }

  template <class Body>
  grpc::ServerUnaryReactor* run(grpc::CallbackServerContext* ctx, AgentCall call, Body body) {
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
  std::string node_;
  mutable std::mutex mu_;
  std::vector<AgentCall> calls_;
  std::map<std::string, Failure> failures_;
  std::map<std::string, std::chrono::milliseconds> delays_;
  std::map<std::string, int> in_flight_;
  std::map<std::string, int> max_in_flight_;
  std::map<std::string, int> per_volume_;
  int max_per_volume_ = 0;
  std::map<std::string, ::csi::v1::Volume> volumes_;
  std::map<std::string, ::csi::v1::Snapshot> snapshots_;
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

  // Starts the agent of `node` and returns its address "127.0.0.1:port".
  std::string start(const std::string& node) {
    if (!agents_.count(node)) agents_[node] = std::make_unique<FakeAgent>(io_.get_executor(), node);
    std::string error;
    auto server = rpc::Server::start(rpc::ServerOptions{.address = "127.0.0.1:0", .services = {agents_[node].get()}}, error);
    if (!server) throw std::runtime_error("fake agent: " + error);
    std::string address = "127.0.0.1:" + std::to_string(server->port());
    servers_[node] = std::move(server);
    return address;
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
