#include "services/controlplane/namespaces/namespace_rules.hpp"

#include <array>
#include <set>

#include "shared/domain/ids.hpp"
#include "shared/domain/text.hpp"

namespace mooring::controlplane::namespaces {

using domain::in_quotes;

bool exists(const StateStore& store, std::string_view ns) {
  return ns == domain::kDefaultNamespace || store.namespace_record(std::string(ns)) != nullptr;
}

std::optional<std::string> unknown(const StateStore& store, std::string_view ns) {
  if (exists(store, ns)) return std::nullopt;
  return "namespace " + in_quotes(ns) + " does not exist; create it first with PUT /v1/namespace/" + std::string(ns) +
         " (mooring namespace apply " + std::string(ns) + ")";
}

std::int64_t requested_capacity(const domain::Volume& v) {
  return v.requested_capacity_min > 0 ? v.requested_capacity_min : v.requested_capacity_max;
}

bool counts_as_running(const domain::Allocation& a) {
  const bool group = a.system && a.system_id.empty();
  return !group && !domain::is_terminal(a);
}

Usage usage(const StateStore& store, std::string_view ns) {
  Usage u;
  for (const auto& [key, v] : store.volumes()) {
    if (v.ns != ns) continue;
    ++u.volumes;
    u.capacity_bytes += requested_capacity(v);
  }
  for (const auto& [id, a] : store.allocations()) {
    if (a.ns != ns) continue;
    if (counts_as_running(a)) ++u.running_allocations;
  }
  return u;
}

std::optional<std::string> over_quota(const StateStore& store, std::string_view ns, const Delta& delta) {
  if (auto no = unknown(store, ns)) return no;  // deleted while the write waited on a plugin
  const auto* record = store.namespace_record(std::string(ns));
  if (!record) return std::nullopt;  // "default" before its record
  const auto& q = record->quota;
  const auto now = usage(store, ns);
  struct Check {
    const std::optional<std::int64_t>& limit;
    std::int64_t used, adds;
    const char *name, *what;
  };
  const std::array checks{
      Check{q.max_volumes, now.volumes, delta.volumes, "MaxVolumes", "volumes"},
      Check{q.max_capacity_bytes, now.capacity_bytes, delta.capacity_bytes, "MaxCapacityBytes",
            "bytes of requested capacity"},
      Check{q.max_running_allocations, now.running_allocations, delta.running_allocations, "MaxRunningAllocations",
            "running allocations"},
  };
  for (const auto& c : checks) {
    if (!c.limit || c.adds <= 0 || c.used + c.adds <= *c.limit) continue;
    return "namespace " + in_quotes(ns) + ": quota " + c.name + " is " + std::to_string(*c.limit) + "; it holds " +
           std::to_string(c.used) + " " + c.what + " and this request adds " + std::to_string(c.adds);
  }
  return std::nullopt;
}

std::optional<std::string> delete_refusal(const StateStore& store, std::string_view ns) {
  if (ns == domain::kDefaultNamespace) return std::string("namespace \"default\" always exists; it cannot be deleted");
  std::int64_t live = 0;
  const auto u = usage(store, ns);
  for (const auto& [id, a] : store.allocations())
    if (a.ns == ns && !domain::is_terminal(a)) ++live;
  if (u.volumes == 0 && live == 0) return std::nullopt;
  return "namespace " + in_quotes(ns) + " still holds " + std::to_string(u.volumes) + " volume(s) and " +
         std::to_string(live) + " allocation(s) that are not terminal; deregister and stop them first";
}

Batch adopt_existing(const StateStore& store) {
  std::set<std::string> named;
  for (const auto& [key, v] : store.volumes()) named.insert(v.ns);
  for (const auto& [id, a] : store.allocations()) named.insert(a.ns);
  for (const auto& [key, r] : store.snapshot_records()) named.insert(r.ns);
  for (const auto& [name, p] : store.acl_policies())
    for (const auto& [pattern, rule] : p.namespaces)
      if (pattern.find('*') == std::string::npos && domain::validate_namespace(pattern)) named.insert(pattern);
  Batch batch;
  for (const auto& ns : named) {
    // "default" exists without a record; a fresh cluster writes nothing here.
    if (ns == domain::kDefaultNamespace || store.namespace_record(ns)) continue;
    batch.put(NamespaceRecord{.name = ns,
                              .description = "created on upgrade: it held objects before namespaces were objects"});
    batch.add_event(
        {.topic = "Namespace",
         .type = "NamespaceCreated",
         .ns = ns,
         .key = ns,
         .message = "namespace " + in_quotes(ns) + " recorded at start: it was in use before namespaces were objects"});
  }
  return batch;
}

}  // namespace mooring::controlplane::namespaces
