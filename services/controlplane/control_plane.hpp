// The control plane as one object, as the node agent's agent.hpp is: the state (its backend from
// --state, secrets sealed on the way down, the change feed, the store), the node agents' router
// and gRPC service, the claim GC and the other collectors, the scheduler, the volume lifecycle,
// the REST API and its server, and with etcd the election and the front that forwards to the
// leader. It owns the io_context they run on. main.cpp parses the configuration and runs it.
#pragma once

#include <memory>

#include "services/controlplane/config/controlplane_config.hpp"

namespace mooring::controlplane {

class ControlPlane {
 public:
  // `argv` is kept for a standby's restart (ha::restart_as_standby).
  ControlPlane(const ControlPlaneConfig& flags, char** argv);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Opens the state, listens on both ports and leads (or, with etcd, campaigns), then runs until
  // SIGINT/SIGTERM has stopped everything gracefully. Returns the process's exit code: 0, or
  // non-zero when it could not start (the reason logged).
  int run();

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace mooring::controlplane
