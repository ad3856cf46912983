// The calls the supervisor and the fingerprinter make on one CSI plugin instance: a small
// consumer-side interface, so their logic is unit-tested with a fake plugin and runs against the
// real plugin through gRPC (plugin_manager.hpp). Failures are grpc::Status values.
#pragma once

#include <grpcpp/support/status.h>

#include <boost/asio/awaitable.hpp>

#include "csi/v1/csi.pb.h"

namespace mooring::nodeagent {

class PluginClient {
 public:
  virtual ~PluginClient() = default;

  virtual boost::asio::awaitable<grpc::Status> get_plugin_info(::csi::v1::GetPluginInfoResponse& out) = 0;
  virtual boost::asio::awaitable<grpc::Status> get_plugin_capabilities(
      ::csi::v1::GetPluginCapabilitiesResponse& out) = 0;
  virtual boost::asio::awaitable<grpc::Status> probe(::csi::v1::ProbeResponse& out) = 0;
  virtual boost::asio::awaitable<grpc::Status> controller_get_capabilities(
      ::csi::v1::ControllerGetCapabilitiesResponse& out) = 0;
  // Asked only of a plugin that advertises GROUP_CONTROLLER_SERVICE.
  virtual boost::asio::awaitable<grpc::Status> group_controller_get_capabilities(
      ::csi::v1::GroupControllerGetCapabilitiesResponse& out) = 0;
  virtual boost::asio::awaitable<grpc::Status> node_get_capabilities(::csi::v1::NodeGetCapabilitiesResponse& out) = 0;
  virtual boost::asio::awaitable<grpc::Status> node_get_info(::csi::v1::NodeGetInfoResponse& out) = 0;

  // After close() every call fails at once with UNAVAILABLE naming why: the final fingerprint at
  // shutdown runs against a closed client and so reports the plugin unhealthy (seed 003).
  virtual void close(std::string reason) = 0;
};

}  // namespace mooring::nodeagent
