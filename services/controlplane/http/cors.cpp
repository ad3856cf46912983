#include "services/controlplane/http/cors.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace mooring::controlplane::http {

namespace {

bool listed(const std::vector<std::string>& origins, std::string_view origin) {
  return std::any_of(origins.begin(), origins.end(), [&](const std::string& o) { return o == "*" || o == origin; });
}

// The value for Access-Control-Allow-Origin, or empty when the origin gets nothing.
std::string allow_origin(const std::vector<std::string>& origins, std::string_view origin) {
  if (origin.empty() || !listed(origins, origin)) return {};
  bool any = std::find(origins.begin(), origins.end(), "*") != origins.end();
  return any ? std::string("*") : std::string(origin);
}

constexpr std::string_view exposed = "X-Mooring-Index, X-Nomad-Index, X-Mooring-NextToken, X-Nomad-NextToken";
constexpr std::string_view allowed_headers =
    "Authorization, Content-Type, Idempotency-Key, X-Mooring-Token, X-Nomad-Token, X-Mooring-CSI-Secrets, "
    "X-Nomad-CSI-Secrets";

// An authority's host and port, the port spelled out ("127.0.0.1" -> 127.0.0.1, 80 over plain
// HTTP; "[::1]:4700" -> [::1], 4700).
std::pair<std::string_view, std::string_view> split_authority(std::string_view authority,
                                                              std::string_view default_port) {
  const auto host_end = authority.starts_with('[') ? authority.find(']') + 1 : authority.find(':');
  const auto host = authority.substr(0, host_end);
  if (host_end >= authority.size()) return {host, default_port};
  if (authority[host_end] != ':') return {authority, {}};  // not host[:port]: matches nothing
  return {host, authority.substr(host_end + 1)};
}

// An address no DNS answer can point elsewhere: an IPv4 or bracketed IPv6 literal, or localhost.
bool literal_host(std::string_view host) {
  if (host == "localhost" || (host.size() > 2 && host.front() == '[' && host.back() == ']')) return true;
  return !host.empty() && std::count(host.begin(), host.end(), '.') == 3 &&
         std::all_of(host.begin(), host.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; });
}

}  // namespace

bool same_origin_by_address(const Request& request) {
  const auto origin = request.header("origin");
  const auto scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return false;
  // Scheme, host and port: a page served over plain HTTP is another origin than this HTTPS port.
  if (origin.substr(0, scheme_end) != (request.secure ? "https" : "http")) return false;
  const auto host = request.header("host");
  if (host.empty()) return false;
  const std::string_view default_port = request.secure ? "443" : "80";
  const auto [origin_host, origin_port] = split_authority(origin.substr(scheme_end + 3), default_port);
  const auto [host_host, host_port] = split_authority(host, default_port);
  return !origin_port.empty() && origin_host == host_host && origin_port == host_port && literal_host(host_host);
}

bool is_read_method(std::string_view method) { return method == "GET" || method == "HEAD"; }

bool cors_write_forbidden(const CorsPolicy& policy, const Request& request) {
  auto origin = request.header("origin");
  if (origin.empty() || is_read_method(request.method) || request.method == "OPTIONS") return false;
  return !listed(policy.write_origins, origin) && !same_origin_by_address(request);
}

void apply_cors(const CorsPolicy& policy, const Request& request, Response& response) {
  auto origin = request.header("origin");
  const auto& origins = is_read_method(request.method) ? policy.read_origins : policy.write_origins;
  auto value = allow_origin(origins, origin);
  if (value.empty()) return;
  response.set_header("Access-Control-Allow-Origin", value);
  response.set_header("Access-Control-Expose-Headers", std::string(exposed));
  if (value != "*") response.set_header("Vary", "Origin");
}

Response cors_preflight(const CorsPolicy& policy, const Request& request, std::string_view allow) {
  Response r;
  r.status = 204;
  r.set_header("Allow", std::string(allow));
  auto origin = request.header("origin");
  if (origin.empty()) return r;
  // Offer the read methods to read origins and everything the path supports to write origins.
  std::string methods;
  bool writer = listed(policy.write_origins, origin);
  bool reader = listed(policy.read_origins, origin);
  std::string_view rest = allow;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    auto m = rest.substr(0, comma);
    while (!m.empty() && m.front() == ' ') m.remove_prefix(1);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    bool ok = m == "OPTIONS" || (is_read_method(m) ? (reader || writer) : writer);
    if (ok && !m.empty()) methods += (methods.empty() ? "" : ", ") + std::string(m);
  }
  if (!reader && !writer) return r;
  auto value = allow_origin(writer ? policy.write_origins : policy.read_origins, origin);
  r.set_header("Access-Control-Allow-Origin", value);
  r.set_header("Access-Control-Allow-Methods", methods);
  r.set_header("Access-Control-Allow-Headers", std::string(allowed_headers));
  r.set_header("Access-Control-Max-Age", "600");
  if (value != "*") r.set_header("Vary", "Origin");
  return r;
}

}  // namespace mooring::controlplane::http
