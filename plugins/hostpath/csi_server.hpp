// mooring-hostpath: the gRPC transport. Adapts the generated csi.v1 services to the logic
// classes, passing every call through the CallGate (faults, call log). Synchronous gRPC server:
// the plugin is its own process and each call is short, so a thread per call is simplest.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace mooring::hostpath {

class Identity;
class Controller;
class Node;
class CallGate;

struct CsiHandlers {
  Identity* identity = nullptr;      // always served
  Controller* controller = nullptr;  // null: Controller service not served (UNIMPLEMENTED)
  Node* node = nullptr;              // null: Node service not served
  CallGate* gate = nullptr;
  std::string node_id;  // this plugin's node id, recorded in the call log for node calls
};

class CsiServer {
 public:
  CsiServer();
  ~CsiServer();
  CsiServer(const CsiServer&) = delete;
  CsiServer& operator=(const CsiServer&) = delete;

  // Listens on endpoint ("unix:///path"); returns an error message or empty.
  std::string start(const std::string& endpoint, const CsiHandlers& handlers);
  // Stops accepting calls; calls still running after `grace` are cancelled. Then waits for all.
  void shutdown(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::hostpath
