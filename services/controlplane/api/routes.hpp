// API room (internal): the route table. Each REST route is registered once, with the endpoint
// that answers it and the ACL need it declares; api.cpp matches requests against it, checks the
// need and runs the endpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/controlplane/acl/capability.hpp"
#include "services/controlplane/api/audit_writes.hpp"
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/http/message.hpp"
#include "services/controlplane/state/table.hpp"

namespace mooring::controlplane {
class StateStore;
}

namespace mooring::controlplane::api {

// A need a request adds to its route's, read from the request (a forced delete, a body that
// deploys a plugin) or from the object it names; `why` ends the 403 when it is missing.
struct ExtraNeed {
  acl::Need need;
  std::string_view why;
};
using ExtraNeeds = std::vector<ExtraNeed> (*)(const StateStore&, const http::Request&);

struct Route {
  Endpoint endpoint = nullptr;
  std::optional<Table> watch;  // reads that support blocking queries
  acl::Need need;              // what the caller needs (ACLs on)
  ExtraNeeds extra = nullptr;  // what this request needs besides: each must be met too
  bool keep_answer = true;     // false: an answer carrying a SecretID is never kept for Idempotency-Key
  bool any_namespace = false;  // a list that takes ?namespace=* (its items are then filtered)
  std::string pattern;         // "/v1/volume/csi/:id": the route label of mooring_http_requests_seconds
  bool event_stream = false;   // GET /v1/event/stream: answered by Impl::open_stream, not `endpoint`
  // A read of one object: a blocking query waits for that object to change, not its table.
  std::optional<std::uint64_t> (*watch_index)(const StateStore&, const http::Request&) = nullptr;
  // A write whose path names no object: what its audit line names (audit_writes.hpp).
  AuditObject object = nullptr;
};

// Routes whose objects live in a namespace: the request names one (or "*" on a list).
inline bool namespaced(const Route& r) {
  return r.need.kind == acl::Need::Kind::capability || r.need.kind == acl::Need::Kind::filtered;
}

struct RouteEntry {
  std::string method;
  std::string pattern;
  Route route;
};

// Every route, in the order they are tried.
const std::vector<RouteEntry>& route_entries();

}  // namespace mooring::controlplane::api
