#include "services/controlplane/acl/plugin_objects.hpp"

#include <algorithm>

namespace mooring::controlplane::acl {

bool sees_whole_listing(const Acl& a) {
  return a.is_management() || (a.level(Area::plugin) >= Level::read && a.level(Area::operator_) >= Level::read);
}

bool lists(const Acl& a, const Owner& owner, std::string_view asked) {
  if (sees_whole_listing(a)) return true;
  if (!owner) return false;
  if (asked == "*") return a.allows(Capability::csi_list_volume, *owner);
  return *owner == asked;
}

bool lists_all(const Acl& a, const std::vector<Owner>& owners, std::string_view asked) {
  if (sees_whole_listing(a)) return true;
  return !owners.empty() &&
         std::all_of(owners.begin(), owners.end(), [&](const Owner& o) { return lists(a, o, asked); });
}

bool may_use(const Acl& a, Use use, const std::vector<Owner>& owners) {
  if (a.is_management()) return true;
  const auto cap = use == Use::read ? Capability::csi_read_volume : Capability::csi_write_volume;
  const bool operator_write = a.level(Area::operator_) >= Level::write;
  if (owners.empty()) return operator_write;
  return std::all_of(owners.begin(), owners.end(),
                     [&](const Owner& o) { return o ? a.allows(cap, *o) : operator_write; });
}

std::string use_need(Use use) {
  return std::string(use == Use::read ? "csi-read-volume" : "csi-write-volume") +
         " in the namespace that owns it (operator:write for one no namespace owns)";
}

}  // namespace mooring::controlplane::acl
