// State room: what Mooring records of a snapshot it took (single or a member of a group
// snapshot). A snapshot lives in its plugin, not in a namespace; the record says whose it is —
// the namespace of the volume it was taken from — so listing, restoring and deleting it are
// checked there (acl/plugin_objects.hpp) even after that volume is gone. A snapshot without a
// record (taken before records existed, or outside Mooring) counts as the registered source
// volume's, if any (volumes/ownership.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "shared/domain/result.hpp"
#include "shared/domain/time.hpp"

namespace mooring::controlplane {

struct SnapshotRecord {
  std::string plugin_id;
  std::string id;                         // the plugin's snapshot id
  std::string ns;                         // the source volume's namespace: who may list, restore and delete it
  std::string source_volume_id;           // that volume's id in `ns` when it was taken
  std::string external_source_volume_id;  // and its id at the plugin
  std::string name;                       // as asked; the plugin got domain::volume_key(ns, name)
  std::string group_snapshot_id;          // "" unless a member of a group snapshot
  domain::Time create_time{};
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const SnapshotRecord&) const = default;
};

// "<plugin id>/<snapshot id>": plugin ids never hold '/', so keys never collide.
std::string snapshot_record_key(std::string_view plugin_id, std::string_view snapshot_id);

std::string to_storage_text(const SnapshotRecord& r);
domain::Expected<SnapshotRecord> snapshot_record_from_storage(const nlohmann::json& j);

}  // namespace mooring::controlplane
