// Test support for the agent API: the real ControlPlane gRPC service on an OS-chosen port next to
// the real REST API (ApiServer), node liveness running in a task group, a scripted fake
// ControllerPublisher, and a blocking generated stub for the calls.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mooring/v1/controlplane.grpc.pb.h"
#include "services/controlplane/agentservice/agent_service.hpp"
#include "services/controlplane/claims/controller_publisher.hpp"
#include "services/controlplane/claims/publish_outcome.hpp"
#include "services/controlplane/nodes/liveness.hpp"
#include "shared/async/task_group.hpp"
#include "shared/rpc/server.hpp"
#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/http_client.hpp"

namespace mooring::controlplane {

// Records every publish; answers with `respond` (default: OK with a publish context) after
// `delay`. It checks that the claim it is asked to publish is already durable: in the store and
// in the backend's rows (the intent is committed before the controller is called).
class FakePublisher final : public ControllerPublisher {
 public:
  boost::asio::awaitable<PublishResult> publish(const domain::Volume& volume, const domain::Claim& claim,
                                                std::string csi_node_id) override {
    ++calls;
    last_csi_node_id = csi_node_id;
    last_volume_external_id = volume.external_id;
    const auto* stored = store->volume(volume.id);
    const bool in_store = stored && stored->claims.contains(claim.allocation_id);
    const auto& rows = backend->snapshot.rows[Table::volumes];
    auto row = rows.find(volume.id);
    const bool in_backend = row != rows.end() && row->second.find(claim.allocation_id) != std::string::npos;
    if (!in_store || !in_backend) intent_missing = true;
    if (delay.count() > 0) {
      boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, delay);
      co_await t.async_wait(boost::asio::use_awaitable);
    }
    if (respond) co_return respond(volume, claim);
    PublishResult ok;
    ok.publish_context = {{"device", "/dev/fake-" + volume.id}};
    co_return ok;
  }

  StateStore* store = nullptr;
  FakeBackend* backend = nullptr;
  std::function<PublishResult(const domain::Volume&, const domain::Claim&)> respond;
  std::chrono::milliseconds delay{0};
  int calls = 0;
  bool intent_missing = false;
  std::string last_csi_node_id;
  std::string last_volume_external_id;
};

class AgentServer {
 public:
  explicit AgentServer(LivenessOptions liveness_options = {}, AgentServiceOptions service_options = {},
                       api::ApiOptions api_options = {})
      : api(std::move(api_options)),
        liveness(api.store, liveness_options),
        service(api.io.get_executor(), api.store, liveness, &publisher, service_options) {
    publisher.store = &api.store;
    publisher.backend = &api.backend;
  }
  ~AgentServer() { stop(); }

  void start() {
    std::string error;
    grpc_server = rpc::Server::start(rpc::ServerOptions{.address = "127.0.0.1:0", .services = {service.service()}}, error);
    if (!grpc_server) throw std::runtime_error(error);
    api.start();
    api.on_io([this] {
      tasks.spawn("liveness", [this] { return liveness.run(); });
      return 0;
    });
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_server->port()), grpc::InsecureChannelCredentials());
    stub = v1::ControlPlane::NewStub(channel);
    http_port = api.port;
  }

  void stop() {
    if (!grpc_server) return;
    api.on_io([this] {
      api.store.release_waiters();  // long polls answer now
      tasks.cancel();
      return 0;
    });
    grpc_server->shutdown_blocking(std::chrono::seconds(5));  // from this (non-io) thread
    for (int i = 0; i < 500 && api.on_io([this] { return tasks.size(); }) > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    api.stop();
    grpc_server.reset();
  }

  template <class F>
  auto on_io(F f) {
    return api.on_io(std::move(f));
  }

  ApiServer api;
  FakePublisher publisher;
  NodeLiveness liveness;
  AgentService service;
  std::unique_ptr<rpc::Server> grpc_server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ControlPlane::Stub> stub;
  std::uint16_t http_port = 0;
  async::TaskGroup tasks{api.io.get_executor(), "agent-test"};
};

}  // namespace mooring::controlplane
