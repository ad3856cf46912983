// ACL room: what a request may need. A namespace capability (csi-read-volume, submit-alloc, ...),
// a level of one of the top-level areas (plugin, node, operator), a management token, or nothing.
// Every REST route declares one of these (api/routes.cpp); pure code, no I/O.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace mooring::controlplane::acl {

enum class Capability {
  csi_list_volume,
  csi_read_volume,
  csi_write_volume,
  csi_mount_volume,
  list_allocs,
  read_alloc,
  submit_alloc,
  alloc_lifecycle,
};

inline constexpr std::array kAllCapabilities{Capability::csi_list_volume,  Capability::csi_read_volume,
                                             Capability::csi_write_volume, Capability::csi_mount_volume,
                                             Capability::list_allocs,      Capability::read_alloc,
                                             Capability::submit_alloc,     Capability::alloc_lifecycle};

// "csi-list-volume", ...: the policy spelling.
std::string_view to_string(Capability c);
std::optional<Capability> parse_capability(std::string_view text);

// A top-level area's level, ordered: each grants what the ones below it grant. `deny` is kept
// apart by the rules (it wins over any level another policy grants).
enum class Level { none, list, read, write };
std::string_view to_string(Level l);

enum class Area { plugin, node, operator_ };
std::string_view to_string(Area a);

// What a route needs.
struct Need {
  enum class Kind {
    unset,       // not declared: the route-table test fails on it
    anyone,      // no token needed even with ACLs on (health, bootstrap)
    any_token,   // a valid token, whatever its policies (token/self)
    filtered,    // a valid token or the anonymous policy; the answer shows what it may read (events)
    management,  // a management token (the ACL endpoints)
    capability,  // `capability` in the request's namespace
    area,        // at least `level` on `area`
  };
  Kind kind = Kind::unset;
  Capability capability{};
  Area area{};
  Level level = Level::none;

  static Need anyone() { return {Kind::anyone}; }
  static Need any_token() { return {Kind::any_token}; }
  static Need filtered() { return {Kind::filtered}; }
  static Need management() { return {Kind::management}; }
  static Need cap(Capability c) { return {Kind::capability, c}; }
  static Need on(Area a, Level l) { return {Kind::area, {}, a, l}; }
};

// "csi-write-volume", "node:write", "management", ...: how a refusal names what is missing.
std::string describe(const Need& n);

}  // namespace mooring::controlplane::acl
