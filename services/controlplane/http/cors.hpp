// HTTP room: CORS for browser dashboards. No foreign origin may read or write unless the operator
// lists it (--cors-read-origin, --cors-write-origin), so a web page the operator happens to visit
// can neither read allocations nor deregister volumes on localhost (a "simple" cross-origin POST
// needs no preflight, hence the 403 for unlisted origins, not just a missing header).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "services/controlplane/http/message.hpp"

namespace mooring::controlplane::http {

struct CorsPolicy {
  std::vector<std::string> read_origins;   // GET, HEAD; "*" = any (not the default)
  std::vector<std::string> write_origins;  // PUT, POST, DELETE; "*" = any (not the default)
};

bool is_read_method(std::string_view method);

// True when a browser request (it carries Origin) would write from an origin not allowed to.
// The dashboard this server serves (/ui/) writes from its own origin, which is allowed when the
// browser reached the server by address (see same_origin_by_address).
bool cors_write_forbidden(const CorsPolicy& policy, const Request& request);

// The request comes from a page of this very server: its Origin has the scheme the request came
// by (https on the HTTPS port) and the host and port of its Host (an absent port is the scheme's
// default), and that host is an IP literal or localhost. A DNS name is not trusted this way: a foreign page's
// name can be rebound to this server's address (DNS rebinding) and would then look same-origin.
// Serving the dashboard under a name, list that origin with --cors-write-origin.
bool same_origin_by_address(const Request& request);

// Adds Access-Control-* headers to an actual response.
void apply_cors(const CorsPolicy& policy, const Request& request, Response& response);

// The answer to an OPTIONS request for a path whose methods are `allow` ("GET, PUT, OPTIONS").
Response cors_preflight(const CorsPolicy& policy, const Request& request, std::string_view allow);

}  // namespace mooring::controlplane::http
