// The operator's detach of a volume from one node, and the release of one claim (claims as
// objects). A live node keeps what it runs, so only claims no running allocation needs are moved
// on; a node that is down or gone will not run its allocations again, so they are marked lost and
// the node step is skipped. The claim GC then releases what is left.
#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/gc/node_loss.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

namespace {

std::vector<std::string> claims_on(const domain::Volume& v, const std::string& node_id) {
  std::vector<std::string> allocs;
  for (const auto& [alloc, c] : v.claims)
    if (c.node_id == node_id) allocs.push_back(alloc);
  return allocs;
}

// Unmounting under a running allocation would break it.
std::string still_running(const StateStore& store, const domain::Volume& v, const std::vector<std::string>& allocs) {
  std::string running;
  for (const auto& alloc : allocs) {
    const auto* a = store.allocation(alloc);
    if (v.claims.at(alloc).state == domain::ClaimState::taken && a && !domain::is_terminal(*a) &&
        a->desired_status == domain::DesiredStatus::run)
      running += (running.empty() ? "" : ", ") + in_quotes(alloc);
  }
  return running;
}

void mark_lost(const StateStore& store, const domain::Volume& v, const std::vector<std::string>& allocs,
               const domain::Node* node, const std::string& node_id, Batch& batch, domain::Time now) {
  const std::string reason = "operator detached volume " + in_quotes(v.id) + " from " + (node ? "down" : "unknown") +
                             " node " + in_quotes(node_id);
  for (const auto& alloc : allocs)
    if (const auto* a = store.allocation(alloc); a && !domain::is_terminal(*a))
      gc::mark_allocation_lost(store, *a, reason, batch, now);
}

}  // namespace

Outcome<Detached> VolumeLifecycle::detach(const std::string& id, const std::string& node_id) {
  const domain::Volume* v = store_.volume(id);  // `id` is the volume's key
  if (!v) return missing_volume(id);
  const auto allocs = claims_on(*v, node_id);
  if (allocs.empty())
    return Failure{Failure::Kind::not_found, "volume " + in_quotes(id) + " has no claim on node " + in_quotes(node_id)};
  return release_claims(
      id, node_id, allocs,
      {"VolumeDetachRequested", "operator detach of volume " + in_quotes(id) + " from node " + in_quotes(node_id)});
}

Outcome<Detached> VolumeLifecycle::release_claim(const std::string& key, const std::string& allocation_id) {
  const domain::Volume* v = store_.volume(key);
  if (!v) return missing_volume(key);
  auto it = v->claims.find(allocation_id);
  if (it == v->claims.end())
    return Failure{Failure::Kind::not_found,
                   "volume " + in_quotes(v->id) + " has no claim of allocation " + in_quotes(allocation_id)};
  return release_claims(
      key, it->second.node_id, {allocation_id},
      {"VolumeClaimReleaseRequested",
       "operator release of the claim of allocation " + in_quotes(allocation_id) + " on volume " + in_quotes(v->id)});
}

// The claims go the release's usual way from where they are: the node step first (skipped, with
// the allocations marked lost, only when the node is down or gone), then the controller's. Never
// a bare free.
Outcome<Detached> VolumeLifecycle::release_claims(const std::string& key, const std::string& node_id,
                                                  const std::vector<std::string>& allocs, const Why& why) {
  const domain::Volume* v = store_.volume(key);
  const domain::Node* node = store_.node(node_id);
  const bool node_lost = !node || node->status == domain::NodeStatus::down;
  const auto now = domain::now();
  Batch batch;
  if (!node_lost) {
    if (auto running = still_running(store_, *v, allocs); !running.empty())
      return conflict("volume " + in_quotes(v->id) + ": allocations " + running + " still run on node " +
                      in_quotes(node_id) + "; stop them first");
  } else {
    mark_lost(store_, *v, allocs, node, node_id, batch, now);
  }
  domain::Volume copy = *v;
  const auto target = node_lost ? domain::ClaimState::node_detached : domain::ClaimState::unpublishing;
  for (const auto& alloc : allocs)
    if (domain::is_before(copy.claims.at(alloc).state, target)) (void)advance_claim(copy, alloc, target, now);
  batch.add_event({.topic = "Volume",
                   .type = why.event,
                   .ns = v->ns,
                   .key = v->id,
                   .message = why.message + (node_lost ? " (node unavailable: node step skipped)" : ""),
                   .details = {{"node_id", node_id}, {"claims", std::to_string(allocs.size())}}});
  batch.put(copy);  // after mark_allocation_lost's copy of this volume, so this one wins
  auto index = store_.commit(std::move(batch));
  if (!index) return write_failed("release claims of volume \"" + v->id + "\"", index.error());
  if (retry_release_) retry_release_(key);
  Detached out{*index, {}};
  for (const auto& alloc : allocs) out.claims.push_back(store_.volume(key)->claims.at(alloc));
  return out;
}

}  // namespace mooring::controlplane::volumes
