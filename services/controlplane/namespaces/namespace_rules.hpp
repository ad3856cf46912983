// Namespaces room: which namespaces exist, what each holds, and whether a write fits its quota.
// Pure reads of the state store; the caller commits in the same executor turn as the check, so
// two racing writes cannot both take the last slot (the store is single-threaded, state_store.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "services/controlplane/state/state_store.hpp"

namespace mooring::controlplane::namespaces {

// "default" always exists; any other namespace once it has a record.
bool exists(const StateStore& store, std::string_view ns);
// `namespace "x" does not exist; ...` naming how to create it, or nullopt when it exists.
std::optional<std::string> unknown(const StateStore& store, std::string_view ns);

struct Usage {
  std::int64_t volumes = 0;
  std::int64_t capacity_bytes = 0;  // the sum of requested_capacity()
  std::int64_t running_allocations = 0;
};
// What a namespace holds now (a scan of its volumes and allocations).
Usage usage(const StateStore& store, std::string_view ns);

// What a volume counts against MaxCapacityBytes: its RequestedCapacityMin, or its
// RequestedCapacityMax when it asks no minimum (0 when it asks neither).
std::int64_t requested_capacity(const domain::Volume& v);
// A running allocation: not terminal, and not a system group (its copies are the ones that run).
bool counts_as_running(const domain::Allocation& a);

// What a write adds to a namespace; a change may be negative (a smaller volume).
struct Delta {
  std::int64_t volumes = 0;
  std::int64_t capacity_bytes = 0;
  std::int64_t running_allocations = 0;
};
// The refusal when `delta` would take the namespace past a limit of its quota (only a limit the
// delta grows is checked, so a namespace over a lowered quota may still shrink), naming the
// limit and the figures; nullopt when it fits or there is no quota. A namespace that does not
// exist (deleted while the write waited on a plugin) is refused too: nothing is written into it.
std::optional<std::string> over_quota(const StateStore& store, std::string_view ns, const Delta& delta);

// Why a namespace may not be deleted (default; it holds volumes or live allocations), or nullopt.
std::optional<std::string> delete_refusal(const StateStore& store, std::string_view ns);

// Upgrade: a record for every namespace other than "default" that holds objects or that an ACL
// policy names exactly, where none exists yet, so nothing written before namespaces were objects
// is stranded. The batch is empty when there is nothing to add (always, on a fresh cluster).
Batch adopt_existing(const StateStore& store);

}  // namespace mooring::controlplane::namespaces
