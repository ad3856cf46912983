// The namespace quota at create and register: checked again in the turn that commits, so two
// racing writes cannot both take the last slot.
#include "services/controlplane/namespaces/namespace_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"

namespace mooring::controlplane::volumes {

std::optional<Failure> over_quota(const StateStore& store, const std::vector<const domain::Volume*>& planned) {
  if (planned.empty()) return std::nullopt;
  namespaces::Delta delta;
  for (const auto* v : planned) {
    const auto* stored = store.volume(v->ns, v->id);
    if (!stored) ++delta.volumes;
    delta.capacity_bytes += namespaces::requested_capacity(*v) - (stored ? namespaces::requested_capacity(*stored) : 0);
  }
  // One request acts in one namespace (api/request_params.cpp).
  if (auto refusal = namespaces::over_quota(store, planned.front()->ns, delta)) return conflict(*refusal);
  return std::nullopt;
}

std::optional<Failure> plans_over_quota(const StateStore& store, const std::vector<VolumePlan>& plans) {
  std::vector<const domain::Volume*> planned;
  for (const auto& p : plans) planned.push_back(&p.volume);
  return over_quota(store, planned);
}

}  // namespace mooring::controlplane::volumes
