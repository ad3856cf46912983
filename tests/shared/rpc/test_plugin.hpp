// A tiny CSI plugin for the bridge tests: Identity and Node services whose handlers are
// coroutines (rpc::serve) on a server io_context that runs on its own thread, served on a
// UNIX socket in a unique temp dir.
#pragma once

#include "shared/async/sleep.hpp"
#include "shared/rpc/server.hpp"

#include "csi/v1/csi.grpc.pb.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace mooring::rpc {

namespace asio = boost::asio;
namespace v1 = ::csi::v1;

class TestIdentity final : public v1::Identity::CallbackService {
 public:
  explicit TestIdentity(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  std::atomic<int> probes{0};
  std::atomic<int> probe_delay_ms{0};
  std::atomic<int> probes_cancelled{0};

  grpc::ServerUnaryReactor* Probe(grpc::CallbackServerContext* ctx, const v1::ProbeRequest*,
                                  v1::ProbeResponse* response) override {
    return serve(ex_, ctx, "Probe", [this, response]() -> asio::awaitable<grpc::Status> {
      ++probes;
      if (probe_delay_ms > 0) {
        if (co_await async::sleep_for(std::chrono::milliseconds(probe_delay_ms.load())) ==
            async::SleepEnd::cancelled) {
          ++probes_cancelled;
          co_return grpc::Status(grpc::StatusCode::CANCELLED, "probe cancelled");
        }
      }
      response->mutable_ready()->set_value(true);
      co_return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* GetPluginInfo(grpc::CallbackServerContext* ctx, const v1::GetPluginInfoRequest*,
                                          v1::GetPluginInfoResponse*) override {
    return serve(ex_, ctx, "GetPluginInfo", []() -> asio::awaitable<grpc::Status> {
      co_await async::sleep_for(std::chrono::milliseconds(1));
      throw std::runtime_error("handler bug");
    });
  }

 private:
  asio::any_io_executor ex_;
};

class TestNode final : public v1::Node::CallbackService {
 public:
  explicit TestNode(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  grpc::ServerUnaryReactor* NodeGetInfo(grpc::CallbackServerContext* ctx, const v1::NodeGetInfoRequest*,
                                        v1::NodeGetInfoResponse* response) override {
    return serve(ex_, ctx, "NodeGetInfo", [response]() -> asio::awaitable<grpc::Status> {
      response->set_node_id("node-1");
      response->set_max_volumes_per_node(7);
      co_return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* NodePublishVolume(grpc::CallbackServerContext* ctx,
                                              const v1::NodePublishVolumeRequest* request,
                                              v1::NodePublishVolumeResponse*) override {
    return serve(ex_, ctx, "NodePublishVolume", [this, request]() -> asio::awaitable<grpc::Status> {
      if (request->volume_id().empty() || request->target_path().empty()) {
        co_return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "volume_id and target_path are required");
      }
      published_target = request->target_path();  // only read after the call completed
      co_return grpc::Status::OK;
    });
  }

  std::string published_target;

 private:
  asio::any_io_executor ex_;
};

// Owns the server-side io_context thread and the plugin's services.
class PluginFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mooring-rpc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/csi.sock";
    server_thread_ = std::thread([this] { server_io_.run(); });
  }

  void TearDown() override {
    stop_server();
    work_.reset();
    server_thread_.join();
    std::filesystem::remove_all(dir_);
  }

  void start_server(const std::string& address) {
    std::string error;
    server_ = Server::start(ServerOptions{.address = address, .services = {&identity_, &node_}}, error);
    ASSERT_TRUE(server_) << error;
  }
  void start_plugin() { start_server("unix:" + socket_); }

  // From the test thread, which does not run the server's io_context.
  void stop_server() {
    if (server_) server_->shutdown_blocking(std::chrono::milliseconds(500));
    server_.reset();
  }

  asio::io_context server_io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(server_io_);
  std::thread server_thread_;
  TestIdentity identity_{server_io_.get_executor()};
  TestNode node_{server_io_.get_executor()};
  std::unique_ptr<Server> server_;
  std::string dir_;
  std::string socket_;
};

}  // namespace mooring::rpc
