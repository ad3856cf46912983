#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/claims/fault_switch.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane {

using domain::in_quotes;

using domain::AccessMode;
using domain::AttachmentMode;
using domain::ClaimMode;
using domain::ClaimState;

namespace {

std::string name(const domain::Volume& v) { return "volume " + in_quotes(v.id); }

std::string holder(const domain::Claim& c) {
  std::string out = "allocation " + in_quotes(c.allocation_id);
  if (!c.node_id.empty()) out += " on node " + in_quotes(c.node_id);
  if (domain::is_past(c.state)) out += " (release in progress: " + std::string(domain::to_string(c.state)) + ")";
  return out;
}

// Retryable: the mark is cleared if the plugin refuses the delete.
Refusal being_deleted(const domain::Volume& v) {
  return unavailable(name(v) + " " + std::string(domain::kBeingDeleted) + "; it takes no new claims");
}

// Final: the volume goes once its claims are released.
Refusal being_deregistered(const domain::Volume& v) {
  return conflict(name(v) + " " + std::string(domain::kBeingDeregistered) + "; it takes no new claims");
}

}  // namespace

Verdict check_schedulable(const domain::Volume& v, const domain::Plugin* plugin) {
  if (v.deleting) return being_deleted(v);
  if (v.deregistering) return being_deregistered(v);
  if (!plugin) return unavailable(name(v) + ": no CSI plugin named " + in_quotes(v.plugin_id) + " is registered");
  if (plugin->controller_required && plugin->controllers_healthy == 0)
    return unavailable(name(v) + ": plugin " + in_quotes(plugin->id) + " has no healthy controllers");
  if (plugin->nodes_healthy == 0)
    return unavailable(name(v) + ": plugin " + in_quotes(plugin->id) + " has no healthy nodes");
  return std::nullopt;
}

Ruled<ClaimOutcome> take_claim(domain::Volume& v, const ClaimRequest& r, domain::Time now) {
  if (r.allocation_id.empty()) return invalid(name(v) + ": a claim needs an allocation id");
  if (v.deleting) return being_deleted(v);
  if (v.deregistering) return being_deregistered(v);
  if (r.access_mode == AccessMode::unknown || r.attachment_mode == AttachmentMode::unknown)
    return invalid(name(v) + ": the claim of allocation " + in_quotes(r.allocation_id) +
                   " needs an access mode and an attachment mode");
  if (!domain::has_capability(v, r.access_mode, r.attachment_mode))
    return invalid(name(v) + " does not support access mode " + std::string(domain::to_string(r.access_mode)) +
                   " with attachment mode " + std::string(domain::to_string(r.attachment_mode)));
  if (r.mode == ClaimMode::write && domain::is_read_only(r.access_mode))
    return invalid(name(v) + ": access mode " + std::string(domain::to_string(r.access_mode)) +
                   " is read-only; allocation " + in_quotes(r.allocation_id) + " cannot claim it for writing");

  auto own = v.claims.find(r.allocation_id);
  if (own != v.claims.end()) {
    const auto& c = own->second;
    if (domain::is_past(c.state))
      return conflict(name(v) + ": the claim of allocation " + in_quotes(r.allocation_id) + " is being released (" +
                      std::string(domain::to_string(c.state)) + "); it can be claimed again once freed");
    if (!c.node_id.empty() && c.node_id != r.node_id)
      return conflict(name(v) + ": allocation " + in_quotes(r.allocation_id) + " already claims it from node " +
                      in_quotes(c.node_id));
    if (c.mode == r.mode && c.access_mode == r.access_mode && c.attachment_mode == r.attachment_mode)
      return ClaimOutcome::unchanged;
  }

  bool others = v.claims.size() > (own != v.claims.end() ? 1u : 0u);
  if (others && v.access_mode != AccessMode::unknown &&
      (v.access_mode != r.access_mode || v.attachment_mode != r.attachment_mode))
    return conflict(name(v) + " is in use with access mode " + std::string(domain::to_string(v.access_mode)) +
                    " and attachment mode " + std::string(domain::to_string(v.attachment_mode)) + "; allocation " +
                    in_quotes(r.allocation_id) + " asked for " + std::string(domain::to_string(r.access_mode)) +
                    " and " + std::string(domain::to_string(r.attachment_mode)));
  int other_writers = 0;
  const domain::Claim* first_writer = nullptr;
  for (const auto& [alloc, c] : v.claims) {
    if (alloc == r.allocation_id) continue;
    if (domain::is_single_node(r.access_mode) && c.node_id != r.node_id)
      return conflict(name(v) + " (" + std::string(domain::to_string(r.access_mode)) + ") is attached to node " +
                      in_quotes(c.node_id) + " for " + holder(c) + "; it cannot be claimed from node " +
                      in_quotes(r.node_id));
    if (c.mode == ClaimMode::write) {
      ++other_writers;
      if (!first_writer) first_writer = &c;
    }
  }
  if (r.mode == ClaimMode::write && !fault_switch(FaultSwitch::second_writer)) {
    int max = domain::max_writers(r.access_mode);
    if (max > 0 && other_writers >= max)
      return conflict("volume max claims reached: " + name(v) + " (" + std::string(domain::to_string(r.access_mode)) +
                      ") is claimed for writing by " + holder(*first_writer));
  }

  domain::Claim c = own != v.claims.end() ? own->second : domain::Claim{};
  bool existed = own != v.claims.end();
  c.allocation_id = r.allocation_id;
  c.node_id = r.node_id;
  if (!r.external_node_id.empty()) c.external_node_id = r.external_node_id;
  c.mode = r.mode;
  c.access_mode = r.access_mode;
  c.attachment_mode = r.attachment_mode;
  c.state = ClaimState::taken;
  c.last_error.clear();
  c.next_attempt = domain::Time{};
  if (!existed) c.create_time = now;
  c.update_time = now;
  v.claims[r.allocation_id] = std::move(c);
  // The first claim fixes the modes every later claim must match.
  if (!others) {
    v.access_mode = r.access_mode;
    v.attachment_mode = r.attachment_mode;
  }
  return existed ? ClaimOutcome::updated : ClaimOutcome::created;
}

Verdict advance_claim(domain::Volume& v, const std::string& allocation_id, ClaimState to, domain::Time now) {
  auto it = v.claims.find(allocation_id);
  if (it == v.claims.end()) return not_found(name(v) + " has no claim by allocation " + in_quotes(allocation_id));
  auto& c = it->second;
  if (domain::is_before(to, c.state))
    return invalid(name(v) + ": the claim of allocation " + in_quotes(allocation_id) + " cannot move back from " +
                   std::string(domain::to_string(c.state)) + " to " + std::string(domain::to_string(to)));
  c.state = to;
  c.last_error.clear();
  c.next_attempt = domain::Time{};
  c.update_time = now;
  return std::nullopt;
}

Verdict record_release_failure(domain::Volume& v, const std::string& allocation_id, std::string error,
                               domain::Time next_attempt, domain::Time now) {
  auto it = v.claims.find(allocation_id);
  if (it == v.claims.end()) return not_found(name(v) + " has no claim by allocation " + in_quotes(allocation_id));
  it->second.last_error = std::move(error);
  it->second.next_attempt = next_attempt;
  it->second.update_time = now;
  return std::nullopt;
}

bool free_claim(domain::Volume& v, const std::string& allocation_id) {
  if (v.claims.erase(allocation_id) == 0) return false;
  if (v.claims.empty()) {
    v.access_mode = AccessMode::unknown;
    v.attachment_mode = AttachmentMode::unknown;
  }
  return true;
}

std::vector<std::string> past_claims(const domain::Volume& v) {
  std::vector<std::string> out;
  for (const auto& [alloc, c] : v.claims)
    if (domain::is_past(c.state)) out.push_back(alloc);
  return out;
}

bool is_leaving(const domain::Allocation* alloc) {
  return alloc && (domain::is_terminal(*alloc) || alloc->desired_status == domain::DesiredStatus::stop);
}

void drop_releasing_claims(domain::Volume& v, const std::function<bool(const std::string&)>& leaving) {
  std::erase_if(v.claims, [&](const auto& kv) { return domain::is_past(kv.second.state) || leaving(kv.first); });
  if (v.claims.empty()) {
    v.access_mode = AccessMode::unknown;
    v.attachment_mode = AttachmentMode::unknown;
  }
}

}  // namespace mooring::controlplane
