// Domain: JSON codecs with Nomad-style PascalCase field names (DESIGN.md "API shapes").
// Two directions with different rules:
//   API     output never contains Secrets and shows non-empty MountFlags as ["[REDACTED]"];
//           input is strict: unknown fields, wrong types and bad enum values are errors naming
//           the object and the field, e.g.
//           volume "vol-1": field "RequestedCapabilities[0].AccessMode": unknown access mode "single-writer"
//   storage full fidelity (secrets included) for the control plane's SQLite; decoding checks
//           types but ignores unknown fields so a newer writer's rows still load.
// Times are RFC 3339 strings, durations Go-style strings ("30s", "1m30s"); unset times are
// omitted in API output.
// Each type's fields are one table (json/<type>.cpp, machinery in json/fields.hpp): add a field there.
#pragma once

#include "shared/domain/allocation.hpp"
#include "shared/domain/claim.hpp"
#include "shared/domain/event.hpp"
#include "shared/domain/node.hpp"
#include "shared/domain/node_identity.hpp"
#include "shared/domain/plugin.hpp"
#include "shared/domain/result.hpp"
#include "shared/domain/volume.hpp"

#include <nlohmann/json_fwd.hpp>

#include <vector>

namespace mooring::domain {

inline constexpr const char* kRedacted = "[REDACTED]";

// ---- API output (full objects) ----
nlohmann::json to_api_json(const Volume& v);  // with Claims, ReadAllocs, WriteAllocs
nlohmann::json to_api_json(const Claim& c);
nlohmann::json to_api_json(const Plugin& p);
nlohmann::json to_api_json(const PluginInstance& i);
nlohmann::json to_api_json(const Node& n);
nlohmann::json to_api_json(const NodeIdentity& n);  // without the introductions' secret hashes
nlohmann::json to_api_json(const Allocation& a);
nlohmann::json to_api_json(const Event& e);
nlohmann::json to_api_json(const MountOptions& m);  // flags redacted

// ---- API output (list stubs) ----
nlohmann::json to_api_stub(const Volume& v);
nlohmann::json to_api_stub(const Plugin& p);
nlohmann::json to_api_stub(const Node& n);
nlohmann::json to_api_stub(const Allocation& a);

// ---- API input ----
// One volume object of a register/create body. Required: ID (valid volume id), PluginID,
// RequestedCapabilities (or the legacy top-level AccessMode + AttachmentMode); ExternalID when
// `require_external_id` (register; create gets it from the plugin and rejects it).
Expected<Volume> volume_from_api(const nlohmann::json& j, bool require_external_id);
// {"Volumes":[...]} as sent to PUT /v1/volume/csi/:id and PUT /v1/volumes.
Expected<std::vector<Volume>> volumes_request_from_api(const nlohmann::json& j, bool require_external_id);
// A modify's body, {"MutableParameters": {"KEY": "VALUE", ...}} (strict; at least one entry), for
// volume `id` (named in errors).
Expected<StringMap> modify_request_from_api(const nlohmann::json& j, std::string_view id);
// The inner allocation object of a submit body. Volume requests need Source, AccessMode and
// AttachmentMode; Type defaults to "csi" (the only type). ID, status and index are not inputs.
Expected<Allocation> allocation_from_api(const nlohmann::json& j);
// {"Allocation":{...}} as sent to POST /v1/allocations.
Expected<Allocation> allocation_request_from_api(const nlohmann::json& j);
// A MountOptions object ({"FSType","MountFlags"}); `context` prefixes errors.
Expected<MountOptions> mount_options_from_api(const nlohmann::json& j, std::string_view context);

// ---- storage ----
nlohmann::json to_storage_json(const Volume& v);
nlohmann::json to_storage_json(const Claim& c);
nlohmann::json to_storage_json(const Plugin& p);
nlohmann::json to_storage_json(const PluginInstance& i);
nlohmann::json to_storage_json(const Node& n);
nlohmann::json to_storage_json(const Allocation& a);
nlohmann::json to_storage_json(const Event& e);

Expected<Volume> volume_from_storage(const nlohmann::json& j);
Expected<Claim> claim_from_storage(const nlohmann::json& j);
Expected<Plugin> plugin_from_storage(const nlohmann::json& j);
Expected<PluginInstance> plugin_instance_from_storage(const nlohmann::json& j);
Expected<Node> node_from_storage(const nlohmann::json& j);
Expected<NodeIdentity> node_identity_from_storage(const nlohmann::json& j);
Expected<Allocation> allocation_from_storage(const nlohmann::json& j);
Expected<Event> event_from_storage(const nlohmann::json& j);

}  // namespace mooring::domain
