// API room (internal): the audit log's line for a REST write (audit/audit_log.hpp): which requests
// get one, and the object each names. A route's path names its object (":id", ":name",
// ":accessor"); where it names none, routes.cpp picks one of these, which read the ids the answer
// or a query parameter names: what was created, changed or deleted. Never a body, a header, the
// query string or a secret.
#pragma once

#include <string>
#include <string_view>

#include "services/controlplane/http/message.hpp"

namespace mooring::controlplane::audit {
class AuditLog;
}

namespace mooring::controlplane::api {

// PUT, POST, DELETE and any method this API does not know; not GET, HEAD or OPTIONS.
bool is_write(std::string_view method);

// What a write names as its object, read from its request and its answer.
using AuditObject = std::string (*)(const http::Request&, const http::Response&);

std::string answered_id(const http::Request&, const http::Response&);              // {"ID"}: a new allocation
std::string answered_accessor(const http::Request&, const http::Response&);        // {"AccessorID"}: a new token
std::string answered_volumes(const http::Request&, const http::Response&);         // {"Volumes":[{"ID"}]}
std::string answered_snapshots(const http::Request&, const http::Response&);       // {"Snapshots":[{"ID"}]}
std::string answered_group_snapshot(const http::Request&, const http::Response&);  // the group's id, then its members'
std::string answered_key(const http::Request&, const http::Response&);             // {"KeyID"}: a rotated keyring
std::string queried_snapshot(const http::Request&, const http::Response&);         // ?snapshot_id=
std::string queried_group_snapshot(const http::Request&, const http::Response&);   // ?group_snapshot_id=

// The object of a routed write: `object`'s answer when the route names one, else its path's id.
std::string audited_object(AuditObject object, const http::Request& req, const http::Response& res);

// Appends the line of a write (whatever its answer); anything else is not audited. `accessor`:
// the token that asked (empty: anonymous); `ns`: the namespace it acted in ("" when unknown).
void audit_write(audit::AuditLog* log, const http::Request& req, const http::Response& res, const std::string& accessor,
                 std::string object, std::string ns);

}  // namespace mooring::controlplane::api
