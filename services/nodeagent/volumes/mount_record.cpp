#include "services/nodeagent/volumes/mount_record.hpp"

#include <nlohmann/json.hpp>

#include <optional>

namespace mooring::nodeagent {

using nlohmann::json;

std::string_view to_string(StepState s) {
  switch (s) {
    case StepState::none: return "none";
    case StepState::pending: return "pending";
    case StepState::done: return "done";
  }
  return "none";
}

std::string_view to_string(MountPhase p) {
  switch (p) {
    case MountPhase::mounting: return "mounting";
    case MountPhase::mounted: return "mounted";
    case MountPhase::unmounting: return "unmounting";
    case MountPhase::unmounted: return "unmounted";
  }
  return "mounting";
}

namespace {

std::optional<StepState> parse_step(std::string_view s) {
  for (auto v : {StepState::none, StepState::pending, StepState::done}) {
    if (to_string(v) == s) return v;
  }
  return std::nullopt;
}

std::optional<MountPhase> parse_phase(std::string_view s) {
  for (auto v : {MountPhase::mounting, MountPhase::mounted, MountPhase::unmounting, MountPhase::unmounted}) {
    if (to_string(v) == s) return v;
  }
  return std::nullopt;
}

}  // namespace

std::string encode(const MountRecord& r) {
  json j{
      {"version", 1},
      {"alloc_id", r.alloc_id},
      {"volume_id", r.volume_id},
      {"plugin_id", r.plugin_id},
      {"external_id", r.external_id},
      {"usage", r.usage},
      {"read_only", r.read_only},
      {"access_mode", domain::to_string(r.access_mode)},
      {"attachment_mode", domain::to_string(r.attachment_mode)},
      {"staging_path", r.staging_path},
      {"target_path", r.target_path},
      {"phase", to_string(r.phase)},
      {"staged", to_string(r.staged)},
      {"published", to_string(r.published)},
      {"notify", r.notify},
      {"unmount_attempts", r.unmount_attempts},
      {"last_error", r.last_error},
      {"updated_unix_ms", r.updated_unix_ms},
  };
  if (r.ownership)
    j["ownership"] = {{"group", r.ownership->group},
                      {"by", r.ownership->by},
                      {"walked", r.ownership->walked},
                      {"unix_ms", domain::to_unix_ms(r.ownership->update_time)}};
  return j.dump(2) + "\n";
}

domain::Expected<MountRecord> decode_mount_record(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return domain::error("mount record: not a JSON object");
  MountRecord r;
  try {
    r.alloc_id = j.at("alloc_id").get<std::string>();
    r.volume_id = j.at("volume_id").get<std::string>();
    r.plugin_id = j.at("plugin_id").get<std::string>();
    r.external_id = j.at("external_id").get<std::string>();
    r.usage = j.at("usage").get<std::string>();
    r.read_only = j.value("read_only", false);
    r.staging_path = j.value("staging_path", "");
    r.target_path = j.value("target_path", "");
    r.notify = j.value("notify", false);
    r.unmount_attempts = j.value("unmount_attempts", 0u);
    r.last_error = j.value("last_error", "");
    r.updated_unix_ms = j.value("updated_unix_ms", std::int64_t{0});
    if (const auto o = j.find("ownership"); o != j.end() && o->is_object())
      r.ownership =
          domain::VolumeOwnership{o->value("group", std::int64_t{0}), o->value("by", ""), o->value("walked", false),
                                  domain::from_unix_ms(o->value("unix_ms", std::int64_t{0}))};
    const auto access = domain::parse_access_mode(j.value("access_mode", ""));
    const auto attachment = domain::parse_attachment_mode(j.value("attachment_mode", ""));
    const auto phase = parse_phase(j.at("phase").get<std::string>());
    const auto staged = parse_step(j.at("staged").get<std::string>());
    const auto published = parse_step(j.at("published").get<std::string>());
    if (!access || !attachment || !phase || !staged || !published) {
      return domain::error("mount record for volume \"" + r.volume_id + "\" of allocation \"" + r.alloc_id +
                           "\": unknown mode, phase or step state");
    }
    r.access_mode = *access;
    r.attachment_mode = *attachment;
    r.phase = *phase;
    r.staged = *staged;
    r.published = *published;
  } catch (const json::exception& e) {
    return domain::error(std::string("mount record: ") + e.what());
  }
  return r;
}

}  // namespace mooring::nodeagent
