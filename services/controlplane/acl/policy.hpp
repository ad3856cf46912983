// ACL room: a policy, Nomad-shaped JSON:
//   {"Name":"reader","Description":"…","Rules":{"Namespace":{"*":{"Policy":"read"},
//    "team-a":{"Capabilities":["csi-write-volume","submit-alloc"]}},"Plugin":"read","Node":"read",
//    "Operator":"read"}}
// Parsing validates every field and names the policy and the field in its error. Pure code.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "services/controlplane/acl/capability.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane::acl {

// A namespace's (or glob's) rule: a Policy shorthand and/or explicit Capabilities.
struct NamespaceRule {
  std::optional<std::string> policy;  // "read" | "write" | "deny"
  std::set<Capability> capabilities;  // as listed
  bool operator==(const NamespaceRule&) const = default;
};

// A top-level area's rule: a level, or deny.
struct AreaRule {
  Level level = Level::none;
  bool deny = false;
  bool operator==(const AreaRule&) const = default;
};

struct Policy {
  std::string name;
  std::string description;
  std::map<std::string, NamespaceRule> namespaces;  // key: a namespace name or a glob ("*", "team-*")
  std::optional<AreaRule> plugin, node, operator_;
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const Policy&) const = default;
};

// The capabilities a namespace rule grants: `read` = csi-list-volume, csi-read-volume,
// list-allocs, read-alloc; `write` = all of them; listed Capabilities are added. `deny` is
// reported separately (it wins over anything any rule grants for the same match).
std::set<Capability> granted(const NamespaceRule& r);
bool denies(const NamespaceRule& r);

// 1 to 128 of [A-Za-z0-9_-] (as Nomad).
bool valid_policy_name(std::string_view name);

// The body of PUT /v1/acl/policy/:name. `name` is the path's; a Name in the body must match it.
domain::Expected<Policy> parse_policy(const nlohmann::json& body, std::string_view name);

nlohmann::json to_json(const Policy& p);  // API and storage (plus the indexes)
domain::Expected<Policy> policy_from_storage(const nlohmann::json& j);

}  // namespace mooring::controlplane::acl
