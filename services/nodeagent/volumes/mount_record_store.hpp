// Where the mount records live: one JSON file per (allocation, volume) under the agent's data
// dir ({dir}/{alloc}/{volume}.json), each replaced atomically (temp file, fsync, rename, fsync
// dir), with an in-memory copy for queries. A write that fails is reported and changes nothing in
// memory, so the caller never sends an RPC whose intent is not on disk.
//
// Not thread-safe: used from the agent's executor only.
#pragma once

#include "services/nodeagent/volumes/mount_record.hpp"
#include "shared/domain/result.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mooring::nodeagent {

class MountRecordStore {
 public:
  explicit MountRecordStore(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }

  // Reads every record from disk (replacing the in-memory copy). Files that cannot be read or
  // parsed are logged and left in place for an operator: they are never deleted blindly, since
  // they may name a live mount. Leftover temp files of an interrupted write are removed.
  domain::Status load();

  std::optional<MountRecord> get(const std::string& alloc_id, const std::string& volume_id) const;
  std::vector<MountRecord> all() const;
  std::size_t size() const { return records_.size(); }
  std::vector<MountRecord> for_volume(const std::string& volume_id) const;
  std::vector<MountRecord> for_alloc(const std::string& alloc_id) const;

  // Durably writes `record` (stamping updated_unix_ms), then updates memory. A stored
  // `notify = true` is kept even when `record` says false (see MountRecord::notify).
  domain::Status put(MountRecord& record);
  domain::Status remove(const std::string& alloc_id, const std::string& volume_id);

 private:
  domain::Expected<std::filesystem::path> file_of(const std::string& alloc_id, const std::string& volume_id) const;

  std::filesystem::path dir_;
  std::map<std::pair<std::string, std::string>, MountRecord> records_;  // (alloc, volume)
};

}  // namespace mooring::nodeagent
