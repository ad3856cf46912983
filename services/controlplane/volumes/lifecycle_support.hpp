// Volumes room (internal): what the lifecycle's files share — plugin capability checks, the
// duplicate backend check, secrets into a CSI request, the retry of background negations.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "csi/v1/csi.pb.h"
#include "services/controlplane/acl/plugin_objects.hpp"
#include "services/controlplane/claims/volume_rules.hpp"
#include "services/controlplane/volumes/results.hpp"
#include "shared/async/retry.hpp"
#include "shared/csi/error_table.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/plugin_facts.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane {
class StateStore;
struct SnapshotRecord;
}  // namespace mooring::controlplane

namespace mooring::controlplane::volumes {

using domain::in_quotes;

// A plugin's snapshot as the API shows it, with its owner and that owner's source volume id
// (ownership.cpp) (snapshots.cpp).
Snapshot snapshot_of(const ::csi::v1::Snapshot& s, const std::string& plugin_id, const StateStore& store,
                     const std::string& name = {});

// What the state records of a snapshot Mooring took (its `ns` and source already set) (snapshots.cpp).
SnapshotRecord record_of(const Snapshot& s);

// ---- ownership.cpp: whose the objects a plugin holds are ----
// The volume registered for the plugin's backend volume `external_id` (by its provider), or null.
const domain::Volume* registering_volume(const StateStore& store, const std::string& plugin_id,
                                         const std::string& external_id);
// A snapshot's owner: its record's namespace; without a record, the namespace of the volume that
// registers its source; otherwise nobody.
acl::Owner snapshot_owner(const StateStore& store, const std::string& plugin_id, const std::string& snapshot_id,
                          const std::string& external_source_volume_id);
inline acl::Owner owner_of(const Snapshot& s) { return s.ns.empty() ? acl::Owner() : acl::Owner(s.ns); }
// 403: the asker lacks `use` of `what` ("the volume CloneID names"): the right, not the object's
// id or owner (acl::use_need).
Failure denied(const Asker& asker, acl::Use use, std::string_view what);

// One backend volume under two volume ids would be claimed twice as if it were two: two writers
// on a single-writer disk, or its storage deleted under the other. Refused with the one already
// registered (O(1): the store's backend index), named only to a reader of its namespace;
// `planned` gives the provider and external id, and `earlier` the plans of the same request
// (register.cpp).
std::optional<Failure> registered_elsewhere(const StateStore& store, const domain::Volume& planned,
                                            const acl::Acl& reader, const std::vector<VolumePlan>& earlier = {});

// A 409 naming the limit when the volumes (stored ones count by the change they make) would take
// their namespace past its quota (quota.cpp). Called in the turn that commits them.
std::optional<Failure> over_quota(const StateStore& store, const std::vector<const domain::Volume*>& planned);
std::optional<Failure> plans_over_quota(const StateStore& store, const std::vector<VolumePlan>& plans);

inline void put_secrets(google::protobuf::Map<std::string, std::string>* dst, const StringMap& src) {
  for (const auto& [k, v] : src) (*dst)[k] = v;
}

// Does a controller of the plugin support `flag`? nullopt when one does; `refusal` (400) when
// none does; a retryable failure (503) while that is not known yet (domain::controller_supports):
// a refusal then would send the caller the wrong way (register instead of create, ...).
inline std::optional<Failure> unsupported(const domain::Plugin& p, bool domain::ControllerInfo::*flag,
                                          std::string refusal) {
  const auto supports = domain::controller_supports(p, flag);
  if (supports && *supports) return std::nullopt;
  if (supports) return invalid(std::move(refusal));
  return Failure{Failure::Kind::unavailable,
                 "plugin " + in_quotes(p.id) +
                     " has not reported its controller's capabilities yet (its agent is starting); retry shortly"};
}

// MutableParameters at create or register: only for a plugin that can later modify them (CSI:
// a CO passes mutable_parameters only to a plugin with MODIFY_VOLUME).
inline std::optional<Failure> mutable_unsupported(const domain::Plugin& p, const domain::Volume& v) {
  if (v.mutable_parameters.empty()) return std::nullopt;
  return unsupported(p, &domain::ControllerInfo::supports_modify,
                     "volume " + in_quotes(v.id) + ": field \"MutableParameters\" needs a controller of plugin " +
                         in_quotes(p.id) + " that supports MODIFY_VOLUME");
}

// A DeleteVolume answer that says the volume is still there and nothing is in progress (a
// final error, or FAILED_PRECONDITION: in use or has snapshots), from every controller asked.
template <class R>
bool not_deleted(const R& r) {
  return !r.no_target && !r.uncertain_earlier &&
         (r.outcome == csi::Outcome::final_error || r.outcome == csi::Outcome::retry);
}

// A negation is retried for up to an hour (1 s -> 30 s); it is logged if it gives up.
inline async::RetryOptions negation_retry() {
  async::RetryOptions o;
  o.backoff.initial = std::chrono::seconds(1);
  o.backoff.max = std::chrono::seconds(30);
  o.backoff.max_elapsed = std::chrono::hours(1);
  return o;
}

// A failed page of a plugin listing: ABORTED for a token the plugin no longer knows is the
// caller's to fix (restart the listing); anything else as plugin_failure.
template <class R>
Failure listing_failure(const R& r, const std::string& token, const std::string& plugin_id) {
  if (r.status.error_code() == grpc::StatusCode::ABORTED && !token.empty())
    return invalid("query parameter \"next_token\": no longer valid for plugin " + in_quotes(plugin_id) +
                   "; restart the listing without it");
  return plugin_failure(r);
}

}  // namespace mooring::controlplane::volumes
