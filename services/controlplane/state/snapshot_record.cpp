#include "services/controlplane/state/snapshot_record.hpp"

#include <nlohmann/json.hpp>

namespace mooring::controlplane {

std::string snapshot_record_key(std::string_view plugin_id, std::string_view snapshot_id) {
  return std::string(plugin_id) + "/" + std::string(snapshot_id);
}

std::string to_storage_text(const SnapshotRecord& r) {
  return nlohmann::json{{"PluginID", r.plugin_id},
                        {"ID", r.id},
                        {"Namespace", r.ns},
                        {"SourceVolumeID", r.source_volume_id},
                        {"ExternalSourceVolumeID", r.external_source_volume_id},
                        {"Name", r.name},
                        {"GroupSnapshotID", r.group_snapshot_id},
                        {"CreateTimeMs", domain::to_unix_ms(r.create_time)},
                        {"CreateIndex", r.create_index},
                        {"ModifyIndex", r.modify_index}}
      .dump();
}

domain::Expected<SnapshotRecord> snapshot_record_from_storage(const nlohmann::json& j) {
  if (!j.is_object()) return domain::error("not a JSON object");
  try {
    SnapshotRecord r;
    r.plugin_id = j.at("PluginID").get<std::string>();
    r.id = j.at("ID").get<std::string>();
    r.ns = j.at("Namespace").get<std::string>();
    r.source_volume_id = j.value("SourceVolumeID", std::string());
    r.external_source_volume_id = j.value("ExternalSourceVolumeID", std::string());
    r.name = j.value("Name", std::string());
    r.group_snapshot_id = j.value("GroupSnapshotID", std::string());
    r.create_time = domain::from_unix_ms(j.value("CreateTimeMs", std::int64_t{0}));
    r.create_index = j.value("CreateIndex", std::uint64_t{0});
    r.modify_index = j.value("ModifyIndex", std::uint64_t{0});
    if (r.plugin_id.empty() || r.id.empty() || r.ns.empty())
      return domain::error("snapshot record: PluginID, ID and Namespace must not be empty");
    return r;
  } catch (const nlohmann::json::exception& e) {
    return domain::error(std::string("snapshot record: ") + e.what());
  }
}

}  // namespace mooring::controlplane
