#include "plugins/hostpath/identity.hpp"

namespace mooring::hostpath {

grpc::Status Identity::plugin_info(csi::v1::GetPluginInfoResponse& resp) const {
  resp.set_name(config_.plugin_name);
  resp.set_vendor_version(config_.version);
  (*resp.mutable_manifest())["mode"] = config_.mode;
  return grpc::Status::OK;
}

grpc::Status Identity::plugin_capabilities(csi::v1::GetPluginCapabilitiesResponse& resp) const {
  using S = csi::v1::PluginCapability::Service;
  if (config_.controller) {
    resp.add_capabilities()->mutable_service()->set_type(S::CONTROLLER_SERVICE);
    resp.add_capabilities()->mutable_service()->set_type(S::GROUP_CONTROLLER_SERVICE);
  }
  if (config_.has_topology) resp.add_capabilities()->mutable_service()->set_type(S::VOLUME_ACCESSIBILITY_CONSTRAINTS);
  resp.add_capabilities()->mutable_volume_expansion()->set_type(csi::v1::PluginCapability::VolumeExpansion::ONLINE);
  return grpc::Status::OK;
}

grpc::Status Identity::probe(csi::v1::ProbeResponse& resp) const {
  if (!config_.unhealthy_reason.empty()) {
    return {grpc::StatusCode::FAILED_PRECONDITION, config_.unhealthy_reason};
  }
  resp.mutable_ready()->set_value(true);
  return grpc::Status::OK;
}

}  // namespace mooring::hostpath
