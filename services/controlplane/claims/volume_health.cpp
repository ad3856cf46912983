#include "services/controlplane/claims/volume_health.hpp"

#include <map>

#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

namespace {

domain::Event condition_event(const domain::Volume& v, const domain::Claim& c, const domain::VolumeCondition& now) {
  const auto where = " on node " + in_quotes(c.node_id) + " (allocation " + in_quotes(c.allocation_id) + ")";
  return {.topic = "Volume",
          .type = now.abnormal ? "VolumeConditionAbnormal" : "VolumeConditionNormal",
          .ns = v.ns,
          .key = v.id,
          .message = "volume " + in_quotes(v.id) + (now.abnormal ? " is abnormal" : " is normal again") + where +
                     (now.message.empty() ? std::string{} : ": " + now.message),
          .details = {{"plugin_id", v.plugin_id}, {"node_id", c.node_id}, {"alloc_id", c.allocation_id}}};
}

}  // namespace

VolumeHealthChange plan_volume_stats(const std::string& node_id, const std::vector<domain::VolumeStatsReport>& reports,
                                     const VolumeByKey& volume) {
  VolumeHealthChange out;
  std::map<std::string, domain::Volume> touched;  // by key, as changed so far
  for (const auto& r : reports) {
    auto it = touched.find(r.volume_id);
    if (it == touched.end()) {
      const domain::Volume* stored = volume(r.volume_id);
      if (!stored) continue;
      it = touched.emplace(r.volume_id, *stored).first;
    }
    auto& v = it->second;
    auto claim = v.claims.find(r.alloc_id);
    if (claim == v.claims.end()) continue;
    auto& c = claim->second;
    if (c.node_id != node_id || c.state != domain::ClaimState::taken) continue;
    if (r.usage) c.usage = r.usage;
    if (r.ownership) c.ownership = r.ownership;
    if (r.condition) {
      const bool was_abnormal = c.condition && c.condition->abnormal;
      if (r.condition->abnormal != was_abnormal) out.events.push_back(condition_event(v, c, *r.condition));
      c.condition = r.condition;
    }
  }
  for (auto& [key, v] : touched)
    if (const auto* stored = volume(key); stored && *stored != v) out.volumes.push_back(std::move(v));
  return out;
}

}  // namespace mooring::controlplane
