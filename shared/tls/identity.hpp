// Who a certificate speaks for. Every Mooring leaf certificate carries exactly one URI SAN
// naming its role (and, for a node agent, its node id):
//   spiffe://mooring/server          the control plane
//   spiffe://mooring/node/<node-id>  the node agent of that node
//   spiffe://mooring/cli             an operator's client
// The URI is the identity the services check; the subject CN (server.mooring, agent.<id>.mooring,
// cli.mooring) is only for people reading logs. Pure code.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mooring::tls {

enum class Role { server, agent, cli };

std::string_view to_string(Role role);
std::optional<Role> parse_role(std::string_view text);

struct Identity {
  Role role = Role::server;
  std::string node_id;  // agents only

  bool operator==(const Identity&) const = default;
};

inline constexpr std::string_view kUriPrefix = "spiffe://mooring/";

// spiffe://mooring/...
std::string identity_uri(const Identity& identity);
// nullopt when `uri` is no Mooring identity (another scheme or trust domain, a bad node id).
std::optional<Identity> parse_identity_uri(std::string_view uri);
// The subject common name shown in logs.
std::string common_name(const Identity& identity);

// Node ids as the agent accepts them: 1-128 characters of [A-Za-z0-9._-], not "." or "..".
bool is_valid_node_id(std::string_view id);

// "agent node-1", "server", "cli": how logs and errors name an identity.
std::string describe(const Identity& identity);

}  // namespace mooring::tls
