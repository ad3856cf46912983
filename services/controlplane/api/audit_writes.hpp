// API room (internal): the audit log's line for a REST write (audit/audit_log.hpp): which requests
// get one, and the object each names. A route's path names its object (":id", ":name",
// ":accessor"); where it names none, routes.cpp picks one of these, which read the ids the answer
// or a query parameter names: what was created, changed or deleted. Never a body, a header, the
// query string or a secret.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "services/controlplane/http/message.hpp"

namespace mooring::controlplane::audit {
class AuditLog;
}

namespace mooring::controlplane::api {

// PUT, POST, DELETE and any method this API does not know; not GET, HEAD or OPTIONS, and not
// the empty method of a request that could not be read (it asked nothing: UnparsedRefusals).
bool is_write(std::string_view method);

// Refusals of requests whose method could not be read (not HTTP at all). Not audited: they ask
// nothing of anything, name no one, and anyone who can connect could fill the audit log with
// them. Logged instead, at most one line per `period`, counting those left out before it.
class UnparsedRefusals {
 public:
  explicit UnparsedRefusals(std::chrono::steady_clock::duration period = std::chrono::minutes(1)) : period_(period) {}
  // nullopt: leave this one out; else log it, with how many were left out since the last line.
  std::optional<std::uint64_t> take(std::chrono::steady_clock::time_point now);

 private:
  std::mutex mutex_;  // refusals are reported from every io thread
  std::chrono::steady_clock::duration period_;
  std::optional<std::chrono::steady_clock::time_point> last_;
  std::uint64_t left_out_ = 0;
};

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
// The node enrolled, and the introduction token that enrolled it ({"IntroductionAccessorID"}):
// "node-1 (introduction token <accessor>)". A management token is the line's actor instead.
std::string enrolled_node(const http::Request&, const http::Response&);

// The object of a routed write: `object`'s answer when the route names one, else its path's id.
std::string audited_object(AuditObject object, const http::Request& req, const http::Response& res);

// Appends the line of a write (whatever its answer); anything else is not audited. `accessor`:
// the token that asked (empty: anonymous); `ns`: the namespace it acted in ("" when unknown).
void audit_write(audit::AuditLog* log, const http::Request& req, const http::Response& res, const std::string& accessor,
                 std::string object, std::string ns);

}  // namespace mooring::controlplane::api
