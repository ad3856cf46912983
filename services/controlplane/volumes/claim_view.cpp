#include "services/controlplane/volumes/claim_view.hpp"

#include <algorithm>
#include <tuple>

#include "services/controlplane/gc/release_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/domain/ids.hpp"

namespace mooring::controlplane::volumes {

namespace {

std::string_view step_name(gc::ReleaseAction a) {
  switch (a) {
    case gc::ReleaseAction::detach_node: return "detach-node";
    case gc::ReleaseAction::wait_for_node: return "wait-for-node";
    case gc::ReleaseAction::unpublish_controller: return "unpublish-controller";
    case gc::ReleaseAction::wait_for_controller: return "wait-for-controller";
    case gc::ReleaseAction::advance: return "advance";
    case gc::ReleaseAction::free: return "free";
  }
  return "free";
}

ClaimView view_of(const StateStore& store, const domain::Volume& v, const domain::Claim& c) {
  ClaimView out{v.ns, v.id, v.plugin_id, c, "in-use", "held by allocation \"" + c.allocation_id + "\""};
  if (c.state == domain::ClaimState::taken) return out;
  const gc::ReleaseView view{store.plugin(v.plugin_id), store.node(c.node_id), store.allocation(c.allocation_id),
                             domain::now()};
  const auto d = gc::decide_release(v, c, view);
  out.release_step = step_name(d.action);
  out.release_reason = d.reason;
  return out;
}

bool keeps(const ClaimFilter& f, const domain::Volume& v, const domain::Claim& c) {
  if (!f.ns.empty() && f.ns != "*" && v.ns != f.ns) return false;
  if (!f.volume_id.empty() && v.id != f.volume_id) return false;
  if (!f.node_id.empty() && c.node_id != f.node_id) return false;
  if (!f.allocation_id.empty() && c.allocation_id != f.allocation_id) return false;
  return !f.state || c.state == *f.state;
}

}  // namespace

std::string claim_id(std::string_view volume_id, std::string_view allocation_id) {
  return std::string(volume_id) + ":" + std::string(allocation_id);
}

std::optional<ClaimRef> parse_claim_id(std::string_view id, std::string& why) {
  const auto colon = id.find(':');
  if (colon == std::string_view::npos) {
    why = "a claim id is \"<volume id>:<allocation id>\"";
    return std::nullopt;
  }
  ClaimRef ref{std::string(id.substr(0, colon)), std::string(id.substr(colon + 1))};
  if (auto ok = domain::validate_volume_id(ref.volume_id); !ok) {
    why = ok.error();
    return std::nullopt;
  }
  if (auto ok = domain::validate_allocation_id(ref.allocation_id); !ok) {
    why = ok.error();
    return std::nullopt;
  }
  return ref;
}

std::vector<ClaimView> list_claims(const StateStore& store, const ClaimFilter& filter) {
  std::vector<ClaimView> out;
  for (const auto& [key, v] : store.volumes())
    for (const auto& [alloc, c] : v.claims)
      if (keeps(filter, v, c)) out.push_back(view_of(store, v, c));
  // The store's keys order volumes by their storage key, not by what a reader sees: list by
  // namespace, volume and allocation, the order the table and the CLI show.
  std::sort(out.begin(), out.end(), [](const ClaimView& a, const ClaimView& b) {
    return std::tie(a.ns, a.volume_id, a.claim.allocation_id) < std::tie(b.ns, b.volume_id, b.claim.allocation_id);
  });
  return out;
}

std::optional<ClaimView> find_claim(const StateStore& store, const std::string& key, const std::string& allocation_id) {
  const domain::Volume* v = store.volume(key);
  if (!v) return std::nullopt;
  auto it = v->claims.find(allocation_id);
  if (it == v->claims.end()) return std::nullopt;
  return view_of(store, *v, it->second);
}

}  // namespace mooring::controlplane::volumes
