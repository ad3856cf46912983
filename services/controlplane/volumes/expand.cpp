// Expansion: ControllerExpandVolume, then NodeExpandVolume on every node that has the volume
// published when the plugin asks for it, then the new capacity recorded on top of whatever else
// changed meanwhile.
#include <algorithm>

#include "services/controlplane/claims/volume_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"
#include "shared/wire/volume_capability.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

::csi::v1::ControllerExpandVolumeRequest expand_request(const domain::Volume& wanted, const StringMap& secrets) {
  ::csi::v1::ControllerExpandVolumeRequest csi;
  csi.set_volume_id(wanted.external_id);
  csi.mutable_capacity_range()->set_required_bytes(wanted.requested_capacity_min);
  csi.mutable_capacity_range()->set_limit_bytes(wanted.requested_capacity_max);
  put_secrets(csi.mutable_secrets(), secrets);
  // The capability in use (or the first requested one) tells the plugin how the volume is used.
  auto access = wanted.access_mode;
  auto attachment = wanted.attachment_mode;
  if (access == domain::AccessMode::unknown && !wanted.requested_capabilities.empty()) {
    access = wanted.requested_capabilities.front().access_mode;
    attachment = wanted.requested_capabilities.front().attachment_mode;
  }
  if (access != domain::AccessMode::unknown) {
    if (auto c = domain::csi_volume_capability(access, attachment, wanted.mount_options))
      *csi.mutable_volume_capability() = *c;
  }
  return csi;
}

}  // namespace

asio::awaitable<Outcome<Written>> VolumeLifecycle::expand(domain::Volume wanted, const StringMap& secrets) {
  auto csi = expand_request(wanted, secrets);
  auto res =
      co_await controller_.controller_expand_volume(wanted.plugin_id, domain::volume_key(wanted.ns, wanted.id), csi);
  if (!res.ok()) co_return plugin_failure(res);
  const bool node_expansion = res.response.node_expansion_required();
  std::vector<std::string> node_errors;
  if (node_expansion) node_errors = co_await expand_on_nodes(wanted, csi, secrets);
  co_return record_expansion(wanted, res.response.capacity_bytes(), node_expansion, node_errors);
}

// Once per claim that has the volume published; a node that no longer has it (NOT_FOUND) has
// nothing to grow.
asio::awaitable<std::vector<std::string>> VolumeLifecycle::expand_on_nodes(
    const domain::Volume& wanted, const ::csi::v1::ControllerExpandVolumeRequest& csi, const StringMap& secrets) {
  std::vector<std::string> errors;
  for (const auto& [alloc, claim] : wanted.claims) {
    if (claim.state != domain::ClaimState::taken) continue;
    v1::NodeExpandVolumeRequest ne;
    ne.set_plugin_id(wanted.plugin_id);
    ne.set_volume_id(domain::volume_key(wanted.ns, wanted.id));  // the agent's records are keyed by it
    ne.set_external_id(wanted.external_id);
    ne.set_alloc_id(alloc);
    *ne.mutable_capacity_range() = csi.capacity_range();
    put_secrets(ne.mutable_secrets(), secrets);
    auto r = co_await controller_.node_expand_volume(claim.node_id, ne);
    if (!r.ok() && r.status.error_code() != grpc::StatusCode::NOT_FOUND) errors.push_back(r.error);
  }
  co_return errors;
}

Outcome<Written> VolumeLifecycle::record_expansion(const domain::Volume& wanted, std::int64_t capacity,
                                                   bool node_expansion, const std::vector<std::string>& node_errors) {
  const auto& id = wanted.id;
  const auto key = domain::volume_key(wanted.ns, wanted.id);
  const domain::Volume* latest = store_.volume(key);
  if (!latest) return conflict("volume " + in_quotes(id) + " was deregistered while it was expanded");
  auto again = plan_volume_register(latest, wanted, store_.plugin(wanted.plugin_id));
  if (!again) return from_refusal(again.refusal());
  again->volume.capacity = std::max(capacity, latest->capacity);
  const auto grown = std::to_string(again->volume.capacity);
  std::string message = "expanded volume " + in_quotes(id) + " to " + grown + " bytes";
  if (!node_errors.empty()) message += "; node expansion failed: " + node_errors.front();
  Batch batch;
  batch.add_event({.topic = "Volume",
                   .type = node_errors.empty() ? "VolumeExpanded" : "VolumeNodeExpansionFailed",
                   .ns = wanted.ns,
                   .key = id,
                   .message = message,
                   .details = {{"plugin_id", wanted.plugin_id},
                               {"capacity", grown},
                               {"node_expansion", node_expansion ? "true" : "false"}}});
  batch.put(again->volume);
  auto index = store_.commit(std::move(batch));
  if (!index) return write_failed("record expansion of volume \"" + id + "\"", index.error());
  log_.info("volume expanded", {{"volume_id", id},
                                {"capacity", again->volume.capacity},
                                {"node_expansion", node_expansion},
                                {"node_errors", node_errors.size()}});
  if (!node_errors.empty())
    return Failure{Failure::Kind::plugin_error, "volume " + in_quotes(id) + " was expanded by the controller to " +
                                                    grown +
                                                    " bytes, but node expansion failed: " + node_errors.front()};
  return Written{*index, {*store_.volume(key)}};
}

}  // namespace mooring::controlplane::volumes
