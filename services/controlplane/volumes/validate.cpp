// The plugin's word on a registration (seed 001's ValidateVolumeCapabilities request): before a
// volume is stored, or an update changes what the plugin is told about it, a healthy controller
// instance checks the external id, context, parameters, secrets and each requested capability.
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/wire/volume_capability.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

// How an error names one requested capability. Mount flags may carry credentials: never shown.
std::string describe(const domain::VolumeCapability& cap, const domain::MountOptions& mount) {
  std::string out = "access mode " + std::string(domain::to_string(cap.access_mode)) + ", attachment mode " +
                    std::string(domain::to_string(cap.attachment_mode));
  if (cap.attachment_mode == domain::AttachmentMode::file_system && !mount.fs_type.empty())
    out += ", fs type " + in_quotes(mount.fs_type);
  return out;
}

// What the plugin is told about the volume changed (or it is new): ask again.
bool plugin_view_changed(const domain::Volume* existing, const domain::Volume& planned) {
  return !existing || existing->requested_capabilities != planned.requested_capabilities ||
         existing->mount_options != planned.mount_options || existing->context != planned.context ||
         existing->secrets != planned.secrets || existing->parameters != planned.parameters;
}

}  // namespace

asio::awaitable<std::optional<Failure>> VolumeLifecycle::validate_capabilities(const domain::Volume* existing,
                                                                               domain::Volume planned) {
  const domain::Plugin* plugin = store_.plugin(planned.plugin_id);
  // A plugin without a controller has nobody to ask (as Nomad): the node plugin finds out at mount.
  if (!plugin || (!plugin->controller_required && plugin->controllers.empty())) co_return std::nullopt;
  if (!plugin_view_changed(existing, planned)) co_return std::nullopt;
  const auto named = "volume " + in_quotes(planned.id) + domain::in_namespace(planned.ns) + ": ";
  const auto key = domain::volume_key(planned.ns, planned.id);
  // One call per capability, so a refusal names the capability it is about.
  for (const auto& cap : planned.requested_capabilities) {
    auto csi_cap = domain::csi_volume_capability(cap.access_mode, cap.attachment_mode, planned.mount_options);
    if (!csi_cap) co_return invalid(named + csi_cap.error());
    ::csi::v1::ValidateVolumeCapabilitiesRequest req;
    req.set_volume_id(planned.external_id);
    *req.add_volume_capabilities() = *csi_cap;
    for (const auto& [k, v] : planned.context) (*req.mutable_volume_context())[k] = v;
    for (const auto& [k, v] : planned.parameters) (*req.mutable_parameters())[k] = v;
    for (const auto& [k, v] : planned.mutable_parameters) (*req.mutable_mutable_parameters())[k] = v;
    put_secrets(req.mutable_secrets(), planned.secrets);
    auto res = co_await controller_.validate_volume_capabilities(planned.plugin_id, key, std::move(req));
    const auto what = describe(cap, planned.mount_options);
    if (res.no_target)
      // Refused rather than stored unchecked: the operator learns now, not at the first claim.
      co_return Failure{Failure::Kind::unavailable, named + "cannot validate its capabilities: " + res.error +
                                                        "; register it again once a controller of plugin " +
                                                        in_quotes(planned.plugin_id) + " is healthy"};
    if (res.status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      // Required of controllers by the spec, yet some plugins lack it: nothing to learn, not a refusal.
      log_.warn("plugin does not implement ValidateVolumeCapabilities; registering unchecked",
                {{"volume_id", key}, {"plugin_id", planned.plugin_id}});
      co_return std::nullopt;
    }
    if (res.status.error_code() == grpc::StatusCode::NOT_FOUND)
      co_return invalid(named + "plugin " + in_quotes(planned.plugin_id) + " has no volume with external id " +
                        in_quotes(planned.external_id) + " (" + res.error + ")");
    if (!res.ok()) co_return plugin_failure(res, named + "cannot validate its capabilities: " + res.error);
    if (!res.response.has_confirmed())
      co_return invalid(named + "plugin " + in_quotes(planned.plugin_id) + " does not support " + what +
                        (res.response.message().empty() ? std::string{} : ": " + res.response.message()));
  }
  co_return std::nullopt;
}

}  // namespace mooring::controlplane::volumes
