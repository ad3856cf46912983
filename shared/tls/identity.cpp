#include "shared/tls/identity.hpp"

#include <algorithm>
#include <cctype>

namespace mooring::tls {

std::string_view to_string(Role role) {
  switch (role) {
    case Role::server: return "server";
    case Role::agent: return "agent";
    case Role::cli: return "cli";
  }
  return "unknown";
}

std::optional<Role> parse_role(std::string_view text) {
  if (text == "server") return Role::server;
  if (text == "agent") return Role::agent;
  if (text == "cli") return Role::cli;
  return std::nullopt;
}

bool is_valid_node_id(std::string_view id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '_' || c == '-'; });
}

std::string identity_uri(const Identity& identity) {
  std::string uri(kUriPrefix);
  if (identity.role == Role::agent) return uri + "node/" + identity.node_id;
  return uri + std::string(to_string(identity.role));
}

std::optional<Identity> parse_identity_uri(std::string_view uri) {
  if (!uri.starts_with(kUriPrefix)) return std::nullopt;
  const auto rest = uri.substr(kUriPrefix.size());
  if (rest == "server") return Identity{Role::server, {}};
  if (rest == "cli") return Identity{Role::cli, {}};
  constexpr std::string_view node = "node/";
  if (rest.starts_with(node) && is_valid_node_id(rest.substr(node.size())))
    return Identity{Role::agent, std::string(rest.substr(node.size()))};
  return std::nullopt;
}

std::string common_name(const Identity& identity) {
  if (identity.role == Role::agent) return "agent." + identity.node_id + ".mooring";
  return std::string(to_string(identity.role)) + ".mooring";
}

std::string describe(const Identity& identity) {
  if (identity.role == Role::agent) return "agent of node " + identity.node_id;
  return std::string(to_string(identity.role));
}

}  // namespace mooring::tls
