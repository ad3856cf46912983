// Claims room: the pure rules for taking and releasing claims on a volume. No I/O: callers read
// the volume from the state store, apply a rule to a copy, and commit the copy only when the rule
// allowed it — so a refused claim writes nothing (unlike Nomad, which logs failed claims).
//
// A claim walks taken → unpublishing → node-detached → controller-detached → ready-to-free and is
// then freed (removed). A claim that is being released still holds the volume: a single-writer
// volume cannot be claimed for writing by another allocation until the old claim is freed, and
// the error says which allocation holds it and how far its release got.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "services/controlplane/claims/refusal.hpp"
#include "shared/domain/allocation.hpp"
#include "shared/domain/modes.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/time.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane {

struct ClaimRequest {
  std::string allocation_id;
  std::string node_id;           // Mooring node id of the claiming node
  std::string external_node_id;  // CSI node id on that node (for ControllerPublish later)
  domain::ClaimMode mode = domain::ClaimMode::read;
  domain::AccessMode access_mode = domain::AccessMode::unknown;
  domain::AttachmentMode attachment_mode = domain::AttachmentMode::unknown;
};

enum class ClaimOutcome {
  created,    // a new claim: the caller persists it (intent) and then publishes
  unchanged,  // the allocation already holds exactly this claim (idempotent retry)
  updated,    // the allocation's existing taken claim changed mode (e.g. write -> read)
};

// Can `plugin` serve the volume at all: the volume is not being deleted, the plugin exists, has
// healthy node instances, and has healthy controllers when it requires them. `plugin` may be
// null (unknown plugin).
Verdict check_schedulable(const domain::Volume& volume, const domain::Plugin* plugin);

// Validates `request` against the volume's capabilities, its current modes and its other claims,
// and on success records the claim in `volume` (first claim sets the volume's modes). A volume
// being deleted takes no claim.
// `volume` is unchanged on refusal.
Ruled<ClaimOutcome> take_claim(domain::Volume& volume, const ClaimRequest& request, domain::Time now);

// Moves the allocation's claim forward to `to` (never backwards; skipping states is allowed, as
// when the node is gone). Clears LastError/NextAttempt: the step succeeded.
Verdict advance_claim(domain::Volume& volume, const std::string& allocation_id, domain::ClaimState to,
                      domain::Time now);

// Records a failed release step; the claim keeps its state.
Verdict record_release_failure(domain::Volume& volume, const std::string& allocation_id, std::string error,
                               domain::Time next_attempt, domain::Time now);

// Removes the claim; when it was the last one the volume's modes are reset. Returns false when
// the allocation had no claim (already freed: idempotent).
bool free_claim(domain::Volume& volume, const std::string& allocation_id);

// Allocation ids of claims being released (every state but taken), in id order.
std::vector<std::string> past_claims(const domain::Volume& volume);

// Stopping or done: the allocation's claims are on their way to being released.
bool is_leaving(const domain::Allocation* alloc);

// `volume` as it will be once its releases are done: claims past taken, and those of allocations
// `leaving` says are going, removed (the modes reset when none is left). What placement and a
// claim waiting for a handoff try a new claim against.
void drop_releasing_claims(domain::Volume& volume, const std::function<bool(const std::string&)>& leaving);

}  // namespace mooring::controlplane
