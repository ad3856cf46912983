// Volumes room: what the lifecycle's operations answer with, as plain values (no protobuf, no
// HTTP): the transport renders them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/controlplane/acl/acl.hpp"
#include "services/controlplane/volumes/outcome.hpp"
#include "shared/domain/volume.hpp"

namespace mooring::controlplane::volumes {

using StringMap = std::map<std::string, std::string>;

// Who asks, for the objects a plugin holds rather than a namespace (acl/plugin_objects.hpp has
// the rules): the caller's rights, its token's name for refusals, and the namespace the request
// acts in ("*" on a listing: every namespace the caller may list). The API builds it from the
// request's token; by default it may do nothing.
struct Asker {
  acl::Acl acl;
  std::string token;
  std::string ns{domain::kDefaultNamespace};
  // ACLs off, or a caller who may do everything.
  static Asker unrestricted(std::string ns = std::string(domain::kDefaultNamespace)) {
    return {acl::Acl::management(), "management", std::move(ns)};
  }
};

// A write that leaves these volumes registered, as they are to be shown.
struct Written {
  std::uint64_t index = 0;
  std::vector<domain::Volume> volumes;
};

struct Deregistered {
  std::uint64_t index = 0;
  bool pending = false;  // the claim GC releases the claims first and then removes the volume
};

struct Detached {
  std::uint64_t index = 0;
  std::vector<domain::Claim> claims;  // the detached claims, as now recorded
};

// What a create fills its volume from, as the plugin knows it (both empty: nothing).
struct ContentSource {
  std::string clone_external_id;
  std::string snapshot_id;
};

// One snapshot asked for. Secrets here win over the volume's own.
struct SnapshotRequest {
  std::string ns{domain::kDefaultNamespace};  // the source volume's namespace (the request's)
  std::string volume_id;
  std::string plugin_id;  // "" = the volume's plugin
  std::string name;
  StringMap secrets;
  StringMap parameters;
  std::string external_id;  // filled in by plan_snapshot
};

struct Snapshot {
  std::string id;
  std::string ns;  // whose it is (its record's, else its registered source volume's), "" when nobody's
  std::string external_source_volume_id;
  std::string source_volume_id;  // the source volume's id in `ns` (its record's, else the registered one), or ""
  std::int64_t size_bytes = 0;
  std::int64_t create_time = 0;  // seconds since the epoch
  bool ready = false;
  std::string plugin_id;
  std::string name;               // known only for the snapshots created by this request
  std::string group_snapshot_id;  // "" unless a member of a group snapshot
};

// A group snapshot asked for: several volumes of one namespace and one plugin, snapshotted
// together (CSI CreateVolumeGroupSnapshot). Secrets here win over the volumes' own.
struct GroupSnapshotRequest {
  std::string ns{domain::kDefaultNamespace};
  std::string name;
  std::string plugin_id;  // "" = the volumes' plugin
  std::vector<std::string> volume_ids;
  StringMap secrets;
  StringMap parameters;
  // filled in by plan_group_snapshot, in the order of volume_ids
  std::vector<std::string> external_ids;
  std::vector<std::string> volume_keys;
};

struct GroupSnapshot {
  std::string id;
  std::string name;  // known only for the group created by this request
  std::string plugin_id;
  std::int64_t create_time = 0;  // seconds since the epoch
  bool ready = false;
  std::vector<Snapshot> snapshots;
  std::uint64_t index = 0;
};

struct SnapshotError {
  std::string volume_id;
  std::string name;
  Failure failure;
};

// Each snapshot is answered on its own: a failure does not hide the ones created before it.
struct SnapshotsCreated {
  std::vector<Snapshot> created;
  std::vector<SnapshotError> errors;
  std::size_t asked = 0;
  std::uint64_t index = 0;
};

struct PageRequest {
  std::int32_t max_entries = 0;
  std::string token;
};

template <class T>
struct Page {
  std::vector<T> items;
  std::string next_token;
};

// A volume as the plugin lists it (registered here or not).
struct ExternalVolume {
  std::string external_id;
  std::string ns, volume_id;  // the volume that registers it, if one does
  std::int64_t capacity = 0;
  StringMap context;
  std::string snapshot_id;
  std::string clone_id;
  std::vector<std::string> published_node_ids;
  bool abnormal = false;
  std::string status;
};

}  // namespace mooring::controlplane::volumes
