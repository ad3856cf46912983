// Domain: validation of ids that become host paths or URL segments, and fresh ids.
// Allowed: 1..128 bytes of [A-Za-z0-9._-], not "." or ".."; volume ids may end in a per-alloc
// suffix "[N]" (N decimal, no sign, no leading zeros) because per_alloc sources are "base[N]".
// Anything else (/, \, NUL, control characters, spaces, '%') is rejected so no id can escape
// the directory it names or need URL escaping beyond the brackets.
#pragma once

#include "shared/domain/result.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace mooring::domain {

// External ids (the provider's volume or snapshot ids) are opaque and never validated here.
enum class IdKind { volume, allocation, node, plugin };
std::string_view to_string(IdKind kind);  // "volume id", "allocation id", ...

inline constexpr std::size_t kMaxIdLength = 128;  // CSI's string cap

// The error names the kind and the reason: `invalid volume id "../x": must not contain '/'`.
Status validate_id(IdKind kind, std::string_view id);
inline Status validate_volume_id(std::string_view id) { return validate_id(IdKind::volume, id); }
inline Status validate_allocation_id(std::string_view id) { return validate_id(IdKind::allocation, id); }
inline Status validate_node_id(std::string_view id) { return validate_id(IdKind::node, id); }
inline Status validate_plugin_id(std::string_view id) { return validate_id(IdKind::plugin, id); }

// ---- namespaces (as in Nomad: volumes and allocations belong to one) ----
inline constexpr std::string_view kDefaultNamespace = "default";
inline constexpr std::size_t kMaxNamespaceLength = 128;
// 1..128 bytes of [A-Za-z0-9-] (Nomad's rule); "*" is a query value, never a namespace.
Status validate_namespace(std::string_view ns);

// The key of a volume across namespaces: the control plane's maps and state rows, and the node
// agent's mount records and directory names. A volume in the default namespace is keyed by its
// id alone, so state and mounts from before namespaces keep their keys; elsewhere "ns:id". ':' is
// in neither alphabet, so two keys never collide and a key never nests a directory.
std::string volume_key(std::string_view ns, std::string_view id);
struct VolumeRef {
  std::string ns;
  std::string id;
  bool operator==(const VolumeRef&) const = default;
};
// The namespace and id of a key; an error names what is wrong with it.
Expected<VolumeRef> split_volume_key(std::string_view key);
// A volume key as the node agent receives it: a valid volume id, optionally "ns:" before it.
Status validate_volume_key(std::string_view key);

// "base[N]": the volume a per_alloc request claims for the allocation with index N.
std::string per_alloc_volume_id(std::string_view base, int index);

// A random (version 4) UUID: "3f0e6a1c-9b2d-4c1e-8f3a-5d6b7c8e9f01".
std::string new_id();

}  // namespace mooring::domain
