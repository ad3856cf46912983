// State room: a namespace as an object. Volumes, snapshots and allocations belong to one; a write
// into a namespace with no record is refused (namespaces/namespace_rules.hpp), so a typo never
// makes a new one. "default" always exists, with or without a record. A quota limits what the
// namespace may hold; a limit that is absent means no limit (0 means none may be added).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "shared/domain/result.hpp"

namespace mooring::controlplane {

struct NamespaceQuota {
  std::optional<std::int64_t> max_volumes;
  std::optional<std::int64_t> max_capacity_bytes;  // the sum of the volumes' requested capacity
  std::optional<std::int64_t> max_running_allocations;
  bool operator==(const NamespaceQuota&) const = default;
};

struct NamespaceRecord {
  std::string name;
  std::string description;
  NamespaceQuota quota;
  std::uint64_t create_index = 0;
  std::uint64_t modify_index = 0;
  bool operator==(const NamespaceRecord&) const = default;
};

// {"Name","Description","Quota":{"MaxVolumes","MaxCapacityBytes","MaxRunningAllocations"},
// "CreateIndex","ModifyIndex"}: the storage row and the API's answer are the same shape.
nlohmann::json to_json(const NamespaceRecord& r);
std::string to_storage_text(const NamespaceRecord& r);
domain::Expected<NamespaceRecord> namespace_record_from_storage(const nlohmann::json& j);
// The API's body (PUT /v1/namespace/:name): Description and Quota only; each limit a
// non-negative integer or null; an unknown field is refused, naming it.
domain::Expected<NamespaceRecord> namespace_record_from_request(const std::string& name, const nlohmann::json& body);

}  // namespace mooring::controlplane
