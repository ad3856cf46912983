// JSON tables and codecs for volumes and what they hold: capabilities, mount options,
// topologies and claims. API input adds the register/create rules.
#include "shared/domain/ids.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/json/fields.hpp"
#include "shared/domain/storage_text.hpp"

namespace mooring::domain {
namespace codec {
namespace {

constexpr unsigned kIn = kOut | kInput;

constexpr Field<VolumeCapability> kCapability[] = {
    field<&VolumeCapability::access_mode>("AccessMode", kIn),
    field<&VolumeCapability::attachment_mode>("AttachmentMode", kIn),
};

constexpr Field<MountOptions> kMountOptions[] = {
    field<&MountOptions::fs_type>("FSType", kIn),
    field<&MountOptions::mount_flags>("MountFlags", kIn, {.redact = true}),
    field<&MountOptions::group_change_policy>("GroupChangePolicy", kIn, {.omit_when_unset = true}),
};

constexpr Field<Topology> kTopology[] = {field<&Topology::segments>("Segments", kIn)};

constexpr Field<TopologyRequest> kTopologyRequest[] = {
    field<&TopologyRequest::required>("Required", kIn),
    field<&TopologyRequest::preferred>("Preferred", kIn),
};

constexpr Field<VolumeUsage> kVolumeUsage[] = {
    field<&VolumeUsage::bytes_available>("BytesAvailable", kOut),
    field<&VolumeUsage::bytes_total>("BytesTotal", kOut),
    field<&VolumeUsage::bytes_used>("BytesUsed", kOut),
    field<&VolumeUsage::inodes_available>("InodesAvailable", kOut),
    field<&VolumeUsage::inodes_total>("InodesTotal", kOut),
    field<&VolumeUsage::inodes_used>("InodesUsed", kOut),
    field<&VolumeUsage::update_time>("UpdateTime", kOut),
};

constexpr Field<VolumeOwnership> kVolumeOwnership[] = {
    field<&VolumeOwnership::group>("Group", kOut),
    field<&VolumeOwnership::by>("By", kOut),
    field<&VolumeOwnership::walked>("Walked", kOut),
    field<&VolumeOwnership::update_time>("UpdateTime", kOut),
};

constexpr Field<VolumeCondition> kVolumeCondition[] = {
    field<&VolumeCondition::abnormal>("Abnormal", kOut),
    field<&VolumeCondition::message>("Message", kOut),
    field<&VolumeCondition::update_time>("UpdateTime", kOut),
};

constexpr Field<VolumeModification> kVolumeModification[] = {
    field<&VolumeModification::parameters>("Parameters", kOut),
    field<&VolumeModification::state>("State", kOut),
    field<&VolumeModification::error>("Error", kOut),
    field<&VolumeModification::time>("Time", kOut),
};

constexpr Field<Claim> kClaim[] = {
    field<&Claim::allocation_id>("AllocationID", kOut),
    field<&Claim::node_id>("NodeID", kOut),
    field<&Claim::external_node_id>("ExternalNodeID", kOut),
    field<&Claim::mode>("Mode", kOut),
    field<&Claim::access_mode>("AccessMode", kOut),
    field<&Claim::attachment_mode>("AttachmentMode", kOut),
    field<&Claim::state>("State", kOut),
    field<&Claim::publish_context>("PublishContext", kStore),
    field<&Claim::controller_publish>("ControllerPublish", kOut, {.omit_when_unset = true}),
    field<&Claim::last_error>("LastError", kOut),
    field<&Claim::next_attempt>("NextAttempt", kOut),
    field<&Claim::create_time>("CreateTime", kOut),
    field<&Claim::update_time>("UpdateTime", kOut),
    field<&Claim::usage>("Usage", kOut),
    field<&Claim::condition>("Condition", kOut),
    field<&Claim::ownership>("Ownership", kOut),
};

// Claims are a list on the wire and a map by allocation id in memory.
json claims_json(const std::map<std::string, Claim>& claims, View view) {
  json out = json::array();
  for (const auto& [alloc, c] : claims) out.push_back(write_object(c, nested(view)));
  return out;
}

void claims_text(const std::map<std::string, Claim>& claims, View view, std::string& out) {
  out += '[';
  for (bool first = true; const auto& [alloc, c] : claims) {
    if (!std::exchange(first, false)) out += ',';
    write_object_text(c, nested(view), out);
  }
  out += ']';
}

void read_claims(Reader& r, std::string_view key, std::map<std::string, Claim>& out) {
  r.object_array(key, [&](Reader& c) {
    Claim claim;
    read_object(c, claim);
    if (c.ok() && claim.allocation_id.empty()) return c.fail("AllocationID", "required");
    out[claim.allocation_id] = std::move(claim);
  });
}

json current_readers_json(const Volume& v) { return current_readers(v); }
json current_writers_json(const Volume& v) { return current_writers(v); }

// Nomad shape: alloc id -> stub, for taken claims only.
json allocs_json(const Volume& v, ClaimMode mode) {
  json out = json::object();
  for (const auto& [alloc, c] : v.claims) {
    if (c.state == ClaimState::taken && c.mode == mode) out[alloc] = json{{"ID", alloc}, {"NodeID", c.node_id}};
  }
  return out;
}
json read_allocs_json(const Volume& v) { return allocs_json(v, ClaimMode::read); }
json write_allocs_json(const Volume& v) { return allocs_json(v, ClaimMode::write); }

// Input takes the top-level AccessMode/AttachmentMode as Nomad's legacy single capability.
constexpr Field<Volume> kVolume[] = {
    field<&Volume::ns>("Namespace", kAll | kInput),
    field<&Volume::id>("ID", kAll | kInput),
    field<&Volume::name>("Name", kAll | kInput),
    field<&Volume::plugin_id>("PluginID", kAll | kInput),
    field<&Volume::external_id>("ExternalID", kAll | kInput),
    field<&Volume::provider>("Provider", kAll),
    field<&Volume::provider_version>("ProviderVersion", kOut),
    field<&Volume::requested_capabilities>("RequestedCapabilities", kIn),
    field<&Volume::access_mode>("AccessMode", kAll | kInput),
    field<&Volume::attachment_mode>("AttachmentMode", kAll | kInput),
    field<&Volume::mount_options>("MountOptions", kIn),
    field<&Volume::secrets>("Secrets", kStore | kInput),
    field<&Volume::parameters>("Parameters", kIn),
    field<&Volume::mutable_parameters>("MutableParameters", kIn),
    field<&Volume::last_modify>("LastModify", kOut),
    field<&Volume::context>("Context", kIn),
    field<&Volume::requested_capacity_min>("RequestedCapacityMin", kIn, {.non_negative = kInput}),
    field<&Volume::requested_capacity_max>("RequestedCapacityMax", kIn, {.non_negative = kInput}),
    field<&Volume::capacity>("Capacity", kOut),
    field<&Volume::requested_topologies>("RequestedTopologies", kIn, {.null_when_empty = true}),
    field<&Volume::topologies>("Topologies", kAll),
    field<&Volume::snapshot_id>("SnapshotID", kIn),
    field<&Volume::clone_id>("CloneID", kIn),
    custom<&Volume::claims, claims_json, read_claims, claims_text>("Claims", kOut),
    field<&Volume::deleting>("Deleting", kAll),
    field<&Volume::deregistering>("Deregistering", kAll),
    field<&Volume::create_index>("CreateIndex", kAll),
    field<&Volume::modify_index>("ModifyIndex", kAll),
    // Derived by the control plane when serving reads; never stored.
    field<&Volume::schedulable>("Schedulable", kApi | kStub),
    field<&Volume::controller_required>("ControllerRequired", kApi | kStub),
    field<&Volume::controllers_healthy>("ControllersHealthy", kApi | kStub),
    field<&Volume::controllers_expected>("ControllersExpected", kApi | kStub),
    field<&Volume::nodes_healthy>("NodesHealthy", kApi | kStub),
    field<&Volume::nodes_expected>("NodesExpected", kApi | kStub),
    derived<Volume, current_readers_json>("CurrentReaders", kApi | kStub),
    derived<Volume, current_writers_json>("CurrentWriters", kApi | kStub),
    derived<Volume, read_allocs_json>("ReadAllocs", kApi),
    derived<Volume, write_allocs_json>("WriteAllocs", kApi),
};

void check_id(Reader& r, std::string_view key, IdKind kind, const std::string& id) {
  if (!r.ok() || id.empty()) return;
  if (auto s = validate_id(kind, id); !s) r.fail(key, s.error());
}

void check_ids(Reader& r, const Volume& v, bool require_external_id) {
  if (r.ok())
    if (auto s = validate_namespace(v.ns); !s) r.fail("Namespace", s.error());
  if (r.ok() && v.id.empty()) r.fail("ID", "required");
  check_id(r, "ID", IdKind::volume, v.id);
  if (r.ok() && v.plugin_id.empty()) r.fail("PluginID", "required");
  check_id(r, "PluginID", IdKind::plugin, v.plugin_id);
  if (r.ok() && require_external_id && v.external_id.empty()) r.fail("ExternalID", "required");
  if (r.ok() && !require_external_id && !v.external_id.empty()) {
    r.fail("ExternalID", "must not be set when creating a volume (the plugin assigns it)");
  }
}

// The legacy pair was read into the volume's current modes, which input never sets.
void fold_legacy_capability(Reader& r, Volume& v) {
  const VolumeCapability legacy{v.access_mode, v.attachment_mode};
  v.access_mode = AccessMode::unknown;
  v.attachment_mode = AttachmentMode::unknown;
  if (!r.ok() || legacy == VolumeCapability{}) return;
  if (legacy.access_mode == AccessMode::unknown) r.fail("AccessMode", "required with AttachmentMode");
  if (r.ok() && legacy.attachment_mode == AttachmentMode::unknown) r.fail("AttachmentMode", "required with AccessMode");
  if (r.ok() && !has_capability(v, legacy.access_mode, legacy.attachment_mode)) {
    v.requested_capabilities.push_back(legacy);
  }
}

void check_request(Reader& r, Volume& v) {
  if (r.ok() && v.requested_capabilities.empty()) {
    r.fail("RequestedCapabilities", "at least one {AccessMode, AttachmentMode} is required");
  }
  if (r.ok() && v.requested_capacity_max != 0 && v.requested_capacity_max < v.requested_capacity_min) {
    r.fail("RequestedCapacityMax", "smaller than RequestedCapacityMin");
  }
  if (r.ok() && !v.snapshot_id.empty() && !v.clone_id.empty()) {
    r.fail("CloneID", "a volume is created from a snapshot or a clone, not both");
  }
  if (r.ok() && v.name.empty()) v.name = v.id;
}

}  // namespace

Table<VolumeCapability> fields_of(std::type_identity<VolumeCapability>) { return kCapability; }
Table<MountOptions> fields_of(std::type_identity<MountOptions>) { return kMountOptions; }
Table<Topology> fields_of(std::type_identity<Topology>) { return kTopology; }
Table<TopologyRequest> fields_of(std::type_identity<TopologyRequest>) { return kTopologyRequest; }
Table<VolumeUsage> fields_of(std::type_identity<VolumeUsage>) { return kVolumeUsage; }
Table<VolumeCondition> fields_of(std::type_identity<VolumeCondition>) { return kVolumeCondition; }
Table<VolumeOwnership> fields_of(std::type_identity<VolumeOwnership>) { return kVolumeOwnership; }
Table<VolumeModification> fields_of(std::type_identity<VolumeModification>) { return kVolumeModification; }
Table<Claim> fields_of(std::type_identity<Claim>) { return kClaim; }
Table<Volume> fields_of(std::type_identity<Volume>) { return kVolume; }

// API input must name both modes of each requested capability; storage may hold "" (unset).
void check_input(Reader& r, VolumeCapability& cap) {
  if (r.ok() && cap.access_mode == AccessMode::unknown) r.fail("AccessMode", "required");
  if (r.ok() && cap.attachment_mode == AttachmentMode::unknown) r.fail("AttachmentMode", "required");
}

}  // namespace codec

using codec::json;

json to_api_json(const Volume& v) { return codec::write_object(v, codec::View::api); }
json to_api_json(const Claim& c) { return codec::write_object(c, codec::View::api); }
json to_api_json(const MountOptions& m) { return codec::write_object(m, codec::View::api); }
json to_api_stub(const Volume& v) { return codec::write_object(v, codec::View::stub); }
json to_storage_json(const Volume& v) { return codec::write_object(v, codec::View::storage); }
json to_storage_json(const Claim& c) { return codec::write_object(c, codec::View::storage); }
std::string to_storage_text(const Volume& v) { return codec::write_text(v, codec::View::storage); }

Expected<MountOptions> mount_options_from_api(const json& j, std::string_view context) {
  codec::Ctx ctx{std::string(context), {}};
  MountOptions out;
  codec::Reader r(j, ctx, "", true);
  codec::read_fields(r, out);
  r.finish();
  return codec::finish(ctx, std::move(out));
}

Expected<Volume> volume_from_api(const json& j, bool require_external_id) {
  codec::Ctx ctx{codec::object_name("volume", j, "ID"), {}};
  Volume v;
  codec::Reader r(j, ctx, "", true);
  codec::read_fields(r, v);
  r.finish();
  codec::check_ids(r, v, require_external_id);
  codec::fold_legacy_capability(r, v);
  codec::check_request(r, v);
  return codec::finish(ctx, std::move(v));
}

Expected<std::vector<Volume>> volumes_request_from_api(const json& j, bool require_external_id) {
  codec::Ctx ctx{"request", {}};
  codec::Reader r(j, ctx, "", true);
  const json* list = r.get("Volumes");
  r.finish();
  if (r.ok() && list == nullptr) r.fail("Volumes", "required");
  if (r.ok() && !list->is_array()) r.fail_type("Volumes", "an array", *list);
  if (r.ok() && list->empty()) r.fail("Volumes", "at least one volume is required");
  if (ctx.error) return error(*ctx.error);
  std::vector<Volume> out;
  for (const auto& item : *list) {
    auto v = volume_from_api(item, require_external_id);
    if (!v) return error(v.error());
    out.push_back(std::move(*v));
  }
  return out;
}

Expected<StringMap> modify_request_from_api(const json& j, std::string_view id) {
  codec::Ctx ctx{"modify of volume \"" + std::string(id) + "\"", {}};
  StringMap out;
  codec::Reader r(j, ctx, "", true);
  r.string_map("MutableParameters", out);
  r.finish();
  if (r.ok() && out.empty()) r.fail("MutableParameters", "at least one KEY: VALUE is required");
  return codec::finish(ctx, std::move(out));
}

Expected<Volume> volume_from_storage(const json& j) {
  return codec::from_storage<Volume>(j, "stored " + codec::object_name("volume", j, "ID"), &Volume::id);
}

Expected<Claim> claim_from_storage(const json& j) {
  return codec::from_storage<Claim>(j, "stored " + codec::object_name("claim", j, "AllocationID"));
}

}  // namespace mooring::domain
