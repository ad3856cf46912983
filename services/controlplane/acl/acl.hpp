// ACL room: what one caller may do, compiled from its token's policies (or the anonymous
// policy). Pure code; the API resolves the token and asks `missing(need, namespace)`.
//
// Semantics (Nomad's):
// - Namespace rules: an exact name beats any glob; among matching globs the closest wins (the
//   fewest characters matched by `*`); globs equally close are merged. Only that one match
//   applies — a broader glob does not add to it.
// - Several policies naming the same namespace key are merged: capabilities add up, and a
//   `deny` in any of them wins (the namespace grants nothing).
// - Top-level areas (Plugin, Node, Operator): the highest level any policy grants, unless one
//   says `deny`.
// - A management token may do everything.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "services/controlplane/acl/capability.hpp"
#include "services/controlplane/acl/policy.hpp"

namespace mooring::controlplane::acl {

// '*' matches any run of characters (also none); everything else matches itself.
bool glob_match(std::string_view pattern, std::string_view text);

class Acl {
 public:
  static Acl management();
  static Acl from_policies(const std::vector<const Policy*>& policies);

  bool is_management() const { return management_; }
  // In namespace `ns`; "*" (a list of every namespace) asks allows_somewhere.
  bool allows(Capability c, std::string_view ns) const;
  // Some namespace rule grants `c` (the list then shows only the namespaces that do).
  bool allows_somewhere(Capability c) const;
  Level level(Area a) const;
  // The capabilities granted in a namespace after the rules above (empty when denied).
  std::set<Capability> capabilities(std::string_view ns) const;
  // nullopt when `need` is met in namespace `ns`; otherwise what is missing ("csi-write-volume",
  // "node:write", "management"). A `filtered` or `any_token` need is met by any Acl.
  std::optional<std::string> missing(const Need& need, std::string_view ns) const;

 private:
  struct Merged {
    std::set<Capability> caps;
    bool deny = false;
  };
  struct MergedArea {
    Level level = Level::none;
    bool deny = false;
  };
  bool management_ = false;
  std::map<std::string, Merged, std::less<>> exact_;
  std::map<std::string, Merged, std::less<>> globs_;
  std::map<Area, MergedArea> areas_;
};

}  // namespace mooring::controlplane::acl
