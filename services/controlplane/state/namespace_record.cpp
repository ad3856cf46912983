#include "services/controlplane/state/namespace_record.hpp"

#include <array>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "shared/domain/ids.hpp"

namespace mooring::controlplane {

namespace {

using Limit = std::optional<std::int64_t> NamespaceQuota::*;
constexpr std::array<std::pair<std::string_view, Limit>, 3> kLimits{{
    {"MaxVolumes", &NamespaceQuota::max_volumes},
    {"MaxCapacityBytes", &NamespaceQuota::max_capacity_bytes},
    {"MaxRunningAllocations", &NamespaceQuota::max_running_allocations},
}};

nlohmann::json quota_json(const NamespaceQuota& q) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, limit] : kLimits) out[std::string(name)] = q.*limit ? nlohmann::json(*(q.*limit)) : nullptr;
  return out;
}

// A limit: absent or null (no limit), or a non-negative integer.
domain::Status read_quota(const nlohmann::json& j, NamespaceQuota& q) {
  if (j.is_null()) return {};
  if (!j.is_object()) return domain::error("field \"Quota\": must be an object");
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const auto& [name, limit] : kLimits) {
      if (key != name) continue;
      known = true;
      if (value.is_null()) continue;
      if (!value.is_number_integer() || value.get<std::int64_t>() < 0)
        return domain::error("field \"Quota." + key + "\": must be a non-negative integer or null, got " +
                             value.dump());
      q.*limit = value.get<std::int64_t>();
    }
    if (!known)
      return domain::error("field \"Quota." + key +
                           "\": unknown; the limits are MaxVolumes, MaxCapacityBytes and MaxRunningAllocations");
  }
  return {};
}

}  // namespace

nlohmann::json to_json(const NamespaceRecord& r) {
  return nlohmann::json{{"Name", r.name},
                        {"Description", r.description},
                        {"Quota", quota_json(r.quota)},
                        {"CreateIndex", r.create_index},
                        {"ModifyIndex", r.modify_index}};
}

std::string to_storage_text(const NamespaceRecord& r) { return to_json(r).dump(); }

domain::Expected<NamespaceRecord> namespace_record_from_storage(const nlohmann::json& j) {
  if (!j.is_object()) return domain::error("not a JSON object");
  try {
    NamespaceRecord r;
    r.name = j.at("Name").get<std::string>();
    r.description = j.value("Description", std::string());
    if (auto st = read_quota(j.value("Quota", nlohmann::json()), r.quota); !st) return domain::error(st.error());
    r.create_index = j.value("CreateIndex", std::uint64_t{0});
    r.modify_index = j.value("ModifyIndex", std::uint64_t{0});
    if (auto st = domain::validate_namespace(r.name); !st) return domain::error("namespace record: " + st.error());
    return r;
  } catch (const nlohmann::json::exception& e) {
    return domain::error(std::string("namespace record: ") + e.what());
  }
}

domain::Expected<NamespaceRecord> namespace_record_from_request(const std::string& name, const nlohmann::json& body) {
  if (!body.is_object()) return domain::error("the body must be a JSON object");
  NamespaceRecord r;
  r.name = name;
  for (const auto& [key, value] : body.items()) {
    if (key == "Name") {
      if (!value.is_string() || value.get<std::string>() != name)
        return domain::error("field \"Name\": must match the path's namespace \"" + name + "\"");
    } else if (key == "Description") {
      if (!value.is_string()) return domain::error("field \"Description\": must be a string");
      r.description = value.get<std::string>();
      if (r.description.size() > 1024) return domain::error("field \"Description\": longer than 1024 bytes");
    } else if (key == "Quota") {
      if (auto st = read_quota(value, r.quota); !st) return domain::error(st.error());
    } else {
      return domain::error("field \"" + key + "\": unknown; a namespace has Name, Description and Quota");
    }
  }
  return r;
}

}  // namespace mooring::controlplane
