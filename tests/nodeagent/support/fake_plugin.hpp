// A CSI plugin for the supervisor and fingerprinter tests: answers from fields the test sets, any
// call can be made to fail, and every call is recorded. FakePluginClient is one client of it (a
// supervisor's): closing it fails only its own calls, as the real InstanceClient does.
#pragma once

#include <grpcpp/support/status.h>

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "services/nodeagent/plugins/plugin_client.hpp"

namespace mooring::nodeagent {

// A plugin answering from fields the test sets; any call can be made to fail.
class FakePlugin final : public PluginClient {
 public:
  ::csi::v1::GetPluginInfoResponse info;
  ::csi::v1::GetPluginCapabilitiesResponse caps;
  ::csi::v1::ProbeResponse probe_resp;
  ::csi::v1::ControllerGetCapabilitiesResponse ccaps;
  ::csi::v1::NodeGetCapabilitiesResponse ncaps;
  ::csi::v1::GroupControllerGetCapabilitiesResponse gcaps;
  ::csi::v1::NodeGetInfoResponse ninfo;
  std::map<std::string, grpc::Status> fail;  // call name -> status
  std::vector<std::string> calls;
  std::string closed;
  std::vector<std::string> closed_clients;  // reasons FakePluginClient::close was given
  std::function<void(const std::string& call)> on_call;  // runs at every call, before it answers

  FakePlugin() {
    info.set_name("hostpath.mooring.dev");
    info.set_vendor_version("1.2.3");
    ninfo.set_node_id("csi-node-1");
  }

  boost::asio::awaitable<grpc::Status> get_plugin_info(::csi::v1::GetPluginInfoResponse& out) override {
    co_return answer("GetPluginInfo", info, out);
  }
  boost::asio::awaitable<grpc::Status> get_plugin_capabilities(::csi::v1::GetPluginCapabilitiesResponse& out) override {
    co_return answer("GetPluginCapabilities", caps, out);
  }
  boost::asio::awaitable<grpc::Status> probe(::csi::v1::ProbeResponse& out) override { co_return answer("Probe", probe_resp, out); }
  boost::asio::awaitable<grpc::Status> controller_get_capabilities(::csi::v1::ControllerGetCapabilitiesResponse& out) override {
    co_return answer("ControllerGetCapabilities", ccaps, out);
  }
  boost::asio::awaitable<grpc::Status> group_controller_get_capabilities(
      ::csi::v1::GroupControllerGetCapabilitiesResponse& out) override {
    co_return answer("GroupControllerGetCapabilities", gcaps, out);
  }
  boost::asio::awaitable<grpc::Status> node_get_capabilities(::csi::v1::NodeGetCapabilitiesResponse& out) override {
    co_return answer("NodeGetCapabilities", ncaps, out);
  }
  boost::asio::awaitable<grpc::Status> node_get_info(::csi::v1::NodeGetInfoResponse& out) override {
    co_return answer("NodeGetInfo", ninfo, out);
  }
  void close(std::string reason) override { closed = std::move(reason); }

  void add_plugin_cap(::csi::v1::PluginCapability::Service::Type t) {
    caps.add_capabilities()->mutable_service()->set_type(t);
  }
  void add_controller_cap(::csi::v1::ControllerServiceCapability::RPC::Type t) {
    ccaps.add_capabilities()->mutable_rpc()->set_type(t);
  }
  void add_node_cap(::csi::v1::NodeServiceCapability::RPC::Type t) {
    ncaps.add_capabilities()->mutable_rpc()->set_type(t);
  }

 private:
  template <class M>
  grpc::Status answer(const std::string& name, const M& value, M& out) {
    calls.push_back(name);
    if (on_call) on_call(name);
    if (!closed.empty()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "closed: " + closed);
    if (auto it = fail.find(name); it != fail.end()) return it->second;
    out = value;
    return grpc::Status::OK;
  }
};


class FakePluginClient final : public PluginClient {
 public:
  explicit FakePluginClient(std::shared_ptr<FakePlugin> plugin) : plugin_(std::move(plugin)) {}

  boost::asio::awaitable<grpc::Status> get_plugin_info(::csi::v1::GetPluginInfoResponse& out) override {
    if (auto st = closed_status("GetPluginInfo")) co_return *st;
    co_return co_await plugin_->get_plugin_info(out);
  }
  boost::asio::awaitable<grpc::Status> get_plugin_capabilities(::csi::v1::GetPluginCapabilitiesResponse& out) override {
    if (auto st = closed_status("GetPluginCapabilities")) co_return *st;
    co_return co_await plugin_->get_plugin_capabilities(out);
  }
  boost::asio::awaitable<grpc::Status> probe(::csi::v1::ProbeResponse& out) override {
    if (auto st = closed_status("Probe")) co_return *st;
    co_return co_await plugin_->probe(out);
  }
  boost::asio::awaitable<grpc::Status> controller_get_capabilities(
      ::csi::v1::ControllerGetCapabilitiesResponse& out) override {
    if (auto st = closed_status("ControllerGetCapabilities")) co_return *st;
    co_return co_await plugin_->controller_get_capabilities(out);
  }
  boost::asio::awaitable<grpc::Status> group_controller_get_capabilities(
      ::csi::v1::GroupControllerGetCapabilitiesResponse& out) override {
    if (auto st = closed_status("GroupControllerGetCapabilities")) co_return *st;
    co_return co_await plugin_->group_controller_get_capabilities(out);
  }
  boost::asio::awaitable<grpc::Status> node_get_capabilities(::csi::v1::NodeGetCapabilitiesResponse& out) override {
    if (auto st = closed_status("NodeGetCapabilities")) co_return *st;
    co_return co_await plugin_->node_get_capabilities(out);
  }
  boost::asio::awaitable<grpc::Status> node_get_info(::csi::v1::NodeGetInfoResponse& out) override {
    if (auto st = closed_status("NodeGetInfo")) co_return *st;
    co_return co_await plugin_->node_get_info(out);
  }
  void close(std::string reason) override {
    closed_ = reason;
    plugin_->closed_clients.push_back(std::move(reason));
  }

 private:
  std::optional<grpc::Status> closed_status(const std::string& call) {
    if (closed_.empty()) return std::nullopt;
    plugin_->calls.push_back(call + " (closed client)");
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin client closed: " + closed_);
  }
  std::shared_ptr<FakePlugin> plugin_;
  std::string closed_;
};

}  // namespace mooring::nodeagent
