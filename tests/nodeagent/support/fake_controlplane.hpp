// A fake ControlPlane gRPC service for node agent tests: records every RegisterNode and
// Heartbeat it receives, answers known=false on request, and can be taken "down" (UNAVAILABLE).
// Thread-safe: gRPC's sync server threads write, the test thread reads.
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mooring/v1/controlplane.grpc.pb.h"

namespace mooring::nodeagent {

class FakeControlPlane final : public ::mooring::v1::ControlPlane::Service {
 public:
  FakeControlPlane();  // listens on 127.0.0.1 with an OS-chosen port
  ~FakeControlPlane() override;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  grpc::Status RegisterNode(grpc::ServerContext*, const ::mooring::v1::RegisterNodeRequest* req,
                            ::mooring::v1::RegisterNodeResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const ::mooring::v1::HeartbeatRequest* req,
                         ::mooring::v1::HeartbeatResponse* resp) override;

  // Next heartbeat answers known=false (the control plane forgot the node).
  void forget_node();
  // While down, every call fails with UNAVAILABLE (and is not recorded).
  void set_down(bool down);

  std::vector<::mooring::v1::RegisterNodeRequest> registrations() const;
  std::vector<::mooring::v1::HeartbeatRequest> heartbeats() const;
  // Every event received, in order, across heartbeats.
  std::vector<::mooring::v1::NodeEvent> events() const;
  // The plugin's fingerprint in the latest heartbeat that carried it.
  std::optional<::mooring::v1::PluginFingerprint> latest(const std::string& plugin_id) const;
  bool saw_event_containing(const std::string& text) const;

 private:
  mutable std::mutex mu_;
  std::vector<::mooring::v1::RegisterNodeRequest> registrations_;
  std::vector<::mooring::v1::HeartbeatRequest> heartbeats_;
  bool forget_ = false;
  bool down_ = false;
  bool registered_ = false;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace mooring::nodeagent
