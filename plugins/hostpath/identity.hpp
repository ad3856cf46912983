// mooring-hostpath: the CSI Identity service logic: name, version, capabilities and health.
#pragma once

#include <string>

#include <grpcpp/support/status.h>

#include "csi/v1/csi.pb.h"

namespace mooring::hostpath {

struct IdentityConfig {
  std::string plugin_name;
  std::string version;
  std::string mode;           // controller | node | monolith
  bool controller = true;     // serves the Controller service
  bool has_topology = false;  // VOLUME_ACCESSIBILITY_CONSTRAINTS
  // Why this plugin cannot work (e.g. no mount privilege for the node service); empty when healthy.
  std::string unhealthy_reason;
};

class Identity {
 public:
  explicit Identity(IdentityConfig config) : config_(std::move(config)) {}

  grpc::Status plugin_info(csi::v1::GetPluginInfoResponse& resp) const;
  grpc::Status plugin_capabilities(csi::v1::GetPluginCapabilitiesResponse& resp) const;
  // FAILED_PRECONDITION with the reason when unhealthy (the spec's "missing dependency"), so the
  // orchestrator can show why; ready=true otherwise.
  grpc::Status probe(csi::v1::ProbeResponse& resp) const;

 private:
  IdentityConfig config_;
};

}  // namespace mooring::hostpath
