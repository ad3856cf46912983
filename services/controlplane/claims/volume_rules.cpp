#include "services/controlplane/claims/volume_rules.hpp"

#include "shared/domain/json.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

namespace {

std::string name(const domain::Volume& v) { return "volume " + in_quotes(v.id); }

bool redacted_flags(const domain::MountOptions& m) {
  return m.mount_flags.size() == 1 && m.mount_flags.front() == domain::kRedacted;
}

std::string capacity_text(std::int64_t bytes) { return std::to_string(bytes) + " bytes"; }

Verdict check_capacity_range(const domain::Volume& v) {
  if (v.requested_capacity_min < 0 || v.requested_capacity_max < 0)
    return invalid(name(v) + ": field \"RequestedCapacityMin\"/\"RequestedCapacityMax\" must not be negative");
  if (v.requested_capacity_max > 0 && v.requested_capacity_max < v.requested_capacity_min)
    return invalid(name(v) + ": field \"RequestedCapacityMax\" (" + capacity_text(v.requested_capacity_max) +
                   ") is below \"RequestedCapacityMin\" (" + capacity_text(v.requested_capacity_min) + ")");
  return std::nullopt;
}

// A first registration: the plugin's facts, and nothing claimed or known of it yet.
VolumePlan plan_new_volume(domain::Volume req, const domain::Plugin& plugin) {
  VolumePlan plan;
  plan.created = true;
  auto& v = plan.volume;
  v = std::move(req);
  v.provider = plugin.provider;
  v.provider_version = plugin.version;
  v.claims.clear();
  v.access_mode = domain::AccessMode::unknown;
  v.attachment_mode = domain::AttachmentMode::unknown;
  v.capacity = 0;
  // A registered volume already exists where the operator says (as in Nomad).
  if (v.topologies.empty()) v.topologies = v.requested_topologies.required;
  return plan;
}

}  // namespace

Ruled<VolumePlan> plan_volume_register(const domain::Volume* existing, domain::Volume req,
                                       const domain::Plugin* plugin) {
  if (!plugin) return invalid(name(req) + ": no CSI plugin named " + in_quotes(req.plugin_id));
  if (req.requested_capabilities.empty())
    return invalid(name(req) + ": field \"RequestedCapabilities\" must name at least one access and attachment mode");
  if (auto bad = check_capacity_range(req)) return *bad;
  if (redacted_flags(req.mount_options) && !existing)
    return invalid(name(req) + ": field \"MountOptions.MountFlags\" is the redacted placeholder");

  if (!existing) return plan_new_volume(std::move(req), *plugin);

  const auto& cur = *existing;
  if (cur.deleting) return conflict(name(cur) + " " + std::string(domain::kBeingDeleted) + "; it cannot be updated");
  if (cur.deregistering)
    return conflict(name(cur) + " " + std::string(domain::kBeingDeregistered) + "; it cannot be updated");
  if (req.plugin_id != cur.plugin_id)
    return invalid(name(cur) + ": field \"PluginID\" cannot be changed (" + in_quotes(cur.plugin_id) + " -> " +
                   in_quotes(req.plugin_id) + ")");
  if (req.external_id != cur.external_id)
    return invalid(name(cur) + ": field \"ExternalID\" cannot be changed (" + in_quotes(cur.external_id) + " -> " +
                   in_quotes(req.external_id) + ")");
  if (!req.parameters.empty() && req.parameters != cur.parameters)
    return invalid(name(cur) + ": field \"Parameters\" cannot be changed after registration");
  if (!req.mutable_parameters.empty() && req.mutable_parameters != cur.mutable_parameters)
    return invalid(name(cur) + ": field \"MutableParameters\" changes through PUT /v1/volume/csi/" + cur.id +
                   "/modify (ControllerModifyVolume), not a re-registration");

  const bool in_use = !cur.claims.empty();
  if (in_use && cur.access_mode != domain::AccessMode::unknown &&
      !domain::has_capability(req, cur.access_mode, cur.attachment_mode))
    return conflict(name(cur) + " is in use with access mode " + std::string(domain::to_string(cur.access_mode)) +
                    " and attachment mode " + std::string(domain::to_string(cur.attachment_mode)) +
                    "; field \"RequestedCapabilities\" must keep that capability");

  domain::MountOptions mount = cur.mount_options;
  if (!req.mount_options.empty()) {
    mount.fs_type = req.mount_options.fs_type;
    if (!redacted_flags(req.mount_options)) mount.mount_flags = req.mount_options.mount_flags;
  }
  if (in_use && mount != cur.mount_options)
    return conflict(name(cur) + " is in use; field \"MountOptions\" cannot change until every claim is released");

  if (!req.requested_topologies.empty() && !cur.topologies.empty() &&
      req.requested_topologies != cur.requested_topologies)
    return invalid(name(cur) + ": field \"RequestedTopologies\" cannot be changed once the volume has topologies");

  VolumePlan plan;
  auto& v = plan.volume;
  v = cur;
  v.name = req.name.empty() ? cur.name : req.name;
  v.requested_capabilities = req.requested_capabilities;
  v.mount_options = mount;
  if (!req.secrets.empty()) v.secrets = req.secrets;
  if (!req.context.empty()) v.context = req.context;
  if (!req.requested_topologies.empty()) v.requested_topologies = req.requested_topologies;
  if (req.requested_capacity_min != 0 || req.requested_capacity_max != 0) {
    if (cur.capacity > 0 && req.requested_capacity_max > 0 && req.requested_capacity_max < cur.capacity)
      return invalid(name(cur) + ": field \"RequestedCapacityMax\" (" + capacity_text(req.requested_capacity_max) +
                     ") is below the current capacity (" + capacity_text(cur.capacity) + "); volumes cannot shrink");
    // A lower minimum or a higher maximum is only recorded; a minimum above the known capacity
    // asks the controller to expand. A capacity of 0 is "unknown" in CSI: then a minimum above
    // the one recorded is the request to grow (never silently recorded as if it had happened).
    v.requested_capacity_min = req.requested_capacity_min;
    v.requested_capacity_max = req.requested_capacity_max;
    plan.expand = cur.capacity > 0 ? req.requested_capacity_min > cur.capacity
                                   : req.requested_capacity_min > cur.requested_capacity_min;
  }
  if (v.topologies.empty()) v.topologies = v.requested_topologies.required;
  return plan;
}

namespace {

std::string keys_of(const domain::StringMap& m) {
  if (m.empty()) return "none";
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ", ") + in_quotes(k);
  return out;
}

}  // namespace

Verdict check_modify(const domain::Volume& v, const domain::StringMap& wanted) {
  if (v.deleting) return conflict(name(v) + " " + std::string(domain::kBeingDeleted) + "; it cannot be modified");
  if (v.deregistering)
    return conflict(name(v) + " " + std::string(domain::kBeingDeregistered) + "; it cannot be modified");
  if (wanted.empty()) return invalid(name(v) + ": a modify names at least one mutable parameter (KEY=VALUE)");
  for (const auto& [key, value] : wanted) {
    if (key.empty()) return invalid(name(v) + ": a mutable parameter's key must not be empty");
    if (v.mutable_parameters.count(key)) continue;
    const std::string why = v.parameters.count(key) ? " is an immutable parameter (field \"Parameters\")"
                                                    : " is not one of its MutableParameters";
    return invalid(name(v) + ": parameter " + in_quotes(key) + why + "; the mutable ones are " +
                   keys_of(v.mutable_parameters));
  }
  for (const auto& [alloc, c] : v.claims) {
    if (!domain::is_past(c.state)) continue;
    return conflict(name(v) + ": the claim of allocation " + in_quotes(alloc) + " is " +
                    std::string(domain::to_string(c.state)) +
                    " (its release is under way); modify once the release has freed it");
  }
  return std::nullopt;
}

Verdict check_deregister(const domain::Volume& v, bool force, const AllocationLookup& allocation) {
  if (v.claims.empty()) return std::nullopt;
  std::string holders;
  for (const auto& [alloc_id, c] : v.claims) {
    const domain::Allocation* a = allocation(alloc_id);
    bool terminal = !a || domain::is_terminal(*a);
    if (force && terminal) continue;
    if (!holders.empty()) holders += ", ";
    holders += in_quotes(alloc_id);
    if (a) holders += " (" + std::string(domain::to_string(a->client_status)) + ")";
  }
  if (holders.empty()) return std::nullopt;
  if (force)
    return conflict(name(v) + " is in use: allocations " + holders +
                    " are not terminal; force deregistration needs every claimant stopped");
  return conflict(name(v) + " is in use by allocations " + holders +
                  "; stop them, or deregister with force=true once they are terminal");
}

}  // namespace mooring::controlplane
