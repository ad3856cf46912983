// WatchAllocations (the node's long poll) and UpdateAllocations (client status and task events).
// An allocation that turns terminal has its claims marked for release in the same commit, so the
// claim GC, watching the volumes table, picks them up and nothing is lost between the two.
#include <algorithm>
#include <set>

#include "services/controlplane/agentservice/handlers.hpp"
#include "services/controlplane/claims/claim_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/wire/proto_convert.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::agentservice {

using domain::in_quotes;

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxAllocationEvents = 50;

// Has an allocation of the node been written since the agent's last look? (One that was deleted
// since, by the allocation GC, does not count: the agent has nothing to do for it.)
bool node_changed_since(const StateStore& store, const std::string& node_id, std::uint64_t min_index) {
  return store.last_allocation_change_on(node_id) > min_index;
}

grpc::Status check_updates(const StateStore& store, const std::string& node_id,
                           const v1::UpdateAllocationsRequest& req) {
  for (const auto& u : req.updates()) {
    if (auto st = check_id(domain::IdKind::allocation, u.alloc_id()); !st.ok()) return st;
    const auto* a = store.allocation(u.alloc_id());
    if (!a) continue;  // deleted by the allocation GC (terminal long ago): nothing left to update
    if (a->node_id != node_id)
      return invalid_argument("allocation " + in_quotes(u.alloc_id()) + " is placed on node " + in_quotes(a->node_id) +
                              ", not on node " + in_quotes(node_id));
    if (u.client_status() != v1::CLIENT_STATUS_UNSPECIFIED && !domain::from_proto(u.client_status()))
      return invalid_argument("allocation " + in_quotes(u.alloc_id()) + ": field \"client_status\": unknown value " +
                              std::to_string(u.client_status()));
  }
  return grpc::Status::OK;
}

// A terminal allocation's claims become past claims: the node side is released first (the agent
// unmounts, then UnpublishVolume), then the claim GC finishes the controller side. `volumes`
// holds the copies this update already changed.
void release_claims(const StateStore& store, const domain::Allocation& a, domain::ClientStatus status, domain::Time now,
                    std::map<std::string, domain::Volume>& volumes, Batch& batch) {
  for (const auto& [name, vr] : a.volumes) {
    const auto vid = domain::claimed_volume_id(vr, a.index);
    const auto key = domain::volume_key(a.ns, vid);
    auto vit = volumes.find(key);
    const domain::Volume* current = vit != volumes.end() ? &vit->second : store.volume(key);
    if (!current) continue;
    auto claim = current->claims.find(a.id);
    if (claim == current->claims.end() || claim->second.state != domain::ClaimState::taken) continue;
    if (vit == volumes.end()) vit = volumes.emplace(key, *current).first;
    if (advance_claim(vit->second, a.id, domain::ClaimState::unpublishing, now)) continue;
    batch.add_event({.topic = "Claim",
                     .type = "ClaimReleaseRequested",
                     .ns = a.ns,
                     .key = vid,
                     .message = "volume " + in_quotes(vid) + domain::in_namespace(a.ns) + ": allocation " +
                                in_quotes(a.id) + " is " + std::string(domain::to_string(status)) +
                                "; its claim is being released",
                     .details = {{"alloc_id", a.id}, {"node_id", a.node_id}}});
  }
}

}  // namespace

asio::awaitable<grpc::Status> watch_allocations(Context& ctx, const v1::WatchAllocationsRequest& req,
                                                v1::WatchAllocationsResponse& resp) {
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) co_return st;
  const std::string node_id = req.node_id();
  if (!ctx.store.node(node_id)) co_return not_found("node not found: " + node_id + " (register first)");
  // What the agent holds comes from another incarnation of the state (we restarted, reloaded, or
  // another leader answered it): its indexes say nothing here, so this is a first look.
  const bool same_incarnation = req.incarnation() != 0 && req.incarnation() == ctx.store.incarnation();
  const std::uint64_t min_index = req.incarnation() == 0 || same_incarnation ? req.min_index() : 0;
  const auto wait =
      std::clamp(std::chrono::milliseconds(req.wait_ms()), std::chrono::milliseconds(0), ctx.options.max_watch_wait);
  const auto deadline = Clock::now() + wait;
  // min_index 0 is a first look: answer at once with the full set.
  if (min_index > 0 && !node_changed_since(ctx.store, node_id, min_index)) {
    for (;;) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) break;
      const std::uint64_t after = ctx.store.table_index(Table::allocations);
      const std::uint64_t index = co_await ctx.store.wait_for_change(Table::allocations, after, left);
      if (node_changed_since(ctx.store, node_id, min_index)) break;
      if (index <= after) break;  // timed out, or the store is shutting down
    }
  }
  // The table index covers every allocation of the node, and is never 0 so an agent that
  // echoes it back never asks for a "first look" again. Never below what the agent echoes from
  // this incarnation: while memory runs ahead of the disk the answer index is the store's (higher)
  // index, and the table index after the flush would look to the agent like a reset.
  resp.set_index(std::max<std::uint64_t>({1, ctx.store.answer_index(Table::allocations), min_index}));
  resp.set_incarnation(ctx.store.incarnation());
  // The live allocations, and terminal ones only while the agent may still act on them: changed
  // since its last look (e.g. stopped by the control plane) or still named in a volume's claims
  // (volumes to unmount). From the store's indexes: an answer costs what it returns, not the
  // terminal allocations the node keeps until the allocation GC.
  std::set<std::string> ids = ctx.store.live_allocation_ids_on(node_id);
  const auto& claiming = ctx.store.claiming_terminal_allocation_ids_on(node_id);
  ids.insert(claiming.begin(), claiming.end());
  for (auto& id : ctx.store.allocation_ids_changed_on(node_id, min_index)) ids.insert(std::move(id));
  // In full only what the agent does not hold as it is now: at most the changed ones, not every
  // live allocation on each change of one (and their bodies, SecretEnv included, only to the node
  // they are placed on: `ids` are this node's, whatever `known` names).
  for (const auto& id : ids) {
    const auto& a = *ctx.store.allocation(id);
    const auto known = same_incarnation ? req.known().find(id) : req.known().end();
    if (known != req.known().end() && known->second == a.modify_index) {
      auto& u = *resp.add_unchanged();
      u.set_id(id);
      u.set_modify_index(a.modify_index);
    } else {
      *resp.add_allocations() = domain::to_proto(a);
    }
  }
  co_return grpc::Status::OK;
}

grpc::Status update_allocations(Context& ctx, const v1::UpdateAllocationsRequest& req, v1::UpdateAllocationsResponse&) {
  if (auto st = check_id(domain::IdKind::node, req.node_id()); !st.ok()) return st;
  const std::string node_id = req.node_id();
  if (!ctx.store.node(node_id)) return not_found("node not found: " + node_id);

  // Validate everything first: a bad update changes nothing.
  if (auto st = check_updates(ctx.store, node_id, req); !st.ok()) return st;

  const auto now = domain::now();
  std::map<std::string, domain::Allocation> allocs;  // changed copies
  std::map<std::string, domain::Volume> volumes;     // changed copies
  Batch batch;
  for (const auto& u : req.updates()) {
    const auto* stored = ctx.store.allocation(u.alloc_id());
    if (!stored) {
      ctx.log.debug("status report for an allocation that is gone; acknowledged", {{"alloc_id", u.alloc_id()}});
      continue;
    }
    auto [it, fresh] = allocs.try_emplace(u.alloc_id(), *stored);
    auto& a = it->second;
    bool changed = false;
    for (const auto& e : u.events()) {
      auto te = domain::from_proto(e);
      if (!domain::is_set(te.time)) te.time = now;
      a.events.push_back(std::move(te));
      changed = true;
    }
    if (a.events.size() > kMaxAllocationEvents)
      a.events.erase(a.events.begin(), a.events.begin() + static_cast<long>(a.events.size() - kMaxAllocationEvents));
    if (auto status = domain::from_proto(u.client_status()); status && *status != a.client_status) {
      if (domain::is_terminal(a.client_status)) {
        // Terminal is final: a late "running" from a retried report must not revive it.
        ctx.log.warn("ignoring a status change of a terminal allocation",
                     {{"alloc_id", a.id},
                      {"status", domain::to_string(a.client_status)},
                      {"reported", domain::to_string(*status)}});
      } else {
        a.client_status = *status;
        changed = true;
        batch.add_event(
            {.topic = "Allocation",
             .type = "AllocationClientStatus",
             .ns = a.ns,
             .key = a.id,
             .message = "allocation " + in_quotes(a.name) + " is " + std::string(domain::to_string(*status)) +
                        " on node " + in_quotes(node_id),
             .details = {{"node_id", node_id}, {"client_status", std::string(domain::to_string(*status))}}});
        if (domain::is_terminal(*status)) {
          release_claims(ctx.store, a, *status, now, volumes, batch);
        }
      }
    }
    if (!changed && fresh) allocs.erase(it);
  }
  for (auto& [id, a] : allocs) batch.put(std::move(a));
  for (auto& [id, v] : volumes) batch.put(std::move(v));
  if (batch.empty()) return grpc::Status::OK;
  if (auto r = ctx.store.commit(std::move(batch)); !r)
    return write_failed(ctx, "update allocations of node " + in_quotes(node_id), r.error());
  return grpc::Status::OK;
}

}  // namespace mooring::controlplane::agentservice
