// ACL room: who may see and use the objects a plugin holds rather than a namespace — backend
// volumes (the external listing, CloneID), snapshots and group snapshots (their listings,
// SnapshotID, deletes). Each belongs to the namespace of the volume that registers it, or of the
// volume it was taken from; one that no namespace owns is the cluster's. Pure code; the rule in
// words is docs/security.md, "Tenant data".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/controlplane/acl/acl.hpp"

namespace mooring::controlplane::acl {

// The namespace an object belongs to; nullopt when none does (an unregistered backend volume,
// a snapshot of one).
using Owner = std::optional<std::string>;

// The plugin's whole listing, objects no namespace owns included: management, or plugin:read
// together with operator:read (an operator looking at the backend, not a tenant).
bool sees_whole_listing(const Acl& a);
inline constexpr std::string_view kWholeListingNeed = "plugin:read and operator:read";

// An item of a plugin listing asked in namespace `asked` ("*": every namespace the caller may
// list) is shown: to whole-listing callers always; otherwise when its owner is the namespace
// asked (the route checked csi-list-volume there), or, for "*", a namespace where the caller
// has csi-list-volume. An item no namespace owns is shown to whole-listing callers only.
bool lists(const Acl& a, const Owner& owner, std::string_view asked);
// Every one of `owners` is listed (a group snapshot: one owner per member). None: not shown
// but to whole-listing callers (a group the plugin lists no member of belongs to nobody).
bool lists_all(const Acl& a, const std::vector<Owner>& owners, std::string_view asked);

// What naming an object does with it: read it (the source of a clone or a restore) or write it
// (delete it).
enum class Use { read, write };

// The caller may use an object with these owners: csi-read-volume (read) or csi-write-volume
// (write) in each owner's namespace; operator:write for an owner-less one (a plugin id Mooring
// never recorded names storage of unknown tenancy). No owners at all counts as owner-less.
bool may_use(const Acl& a, Use use, const std::vector<Owner>& owners);
// What a refusal names as missing. The same text whether the object is another namespace's or
// nobody's, so a refusal tells nothing about what the id names.
std::string use_need(Use use);

}  // namespace mooring::controlplane::acl
