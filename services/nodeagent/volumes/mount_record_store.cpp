#include "services/nodeagent/volumes/mount_record_store.hpp"

#include "shared/durable/durable_file.hpp"
#include "shared/domain/ids.hpp"
#include "shared/log/log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace mooring::nodeagent {

namespace fs = std::filesystem;

namespace {

const log::Logger kLog{"mount-records"};
constexpr std::string_view kSuffix = ".json";
constexpr std::string_view kTempSuffix = ".json.tmp";

std::string errno_text(std::string_view what, const fs::path& path) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(errno);
}

domain::Status make_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) return {};
  return domain::error(errno_text("cannot create", dir));
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

MountRecordStore::MountRecordStore(fs::path dir) : dir_(std::move(dir)) {}

domain::Expected<fs::path> MountRecordStore::file_of(const std::string& alloc_id, const std::string& volume_id) const {
  if (auto s = domain::validate_allocation_id(alloc_id); !s) return domain::error(s.error());
  if (auto s = domain::validate_volume_id(volume_id); !s) return domain::error(s.error());
  return dir_ / alloc_id / (volume_id + std::string(kSuffix));
}

domain::Status MountRecordStore::load() {
  records_.clear();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return domain::error("cannot create " + dir_.string() + ": " + ec.message());
  for (const auto& alloc_dir : fs::directory_iterator(dir_, ec)) {
    if (!alloc_dir.is_directory()) continue;
    std::error_code inner;
    for (const auto& entry : fs::directory_iterator(alloc_dir.path(), inner)) {
      // "<volume>.json.tmp[.<pid>.<n>]": an interrupted write of an older agent (no rename happened).
      if (entry.path().filename().string().find(kTempSuffix) != std::string::npos) fs::remove(entry.path(), inner);
    }
    for (const auto& file : durable::list_durable(alloc_dir.path(), kSuffix)) {
      std::error_code rec;
      const auto text = durable::read_durable(file, rec);
      if (!text) {
        kLog.error("unreadable mount record left in place", {{"file", file.string()}, {"error", rec.message()}});
        continue;
      }
      auto record = decode_mount_record(*text);
      if (!record) {
        kLog.error("unreadable mount record left in place", {{"file", file.string()}, {"error", record.error()}});
        continue;
      }
      auto expected = file_of(record->alloc_id, record->volume_id);
      if (!expected || *expected != file) {
        kLog.error("mount record in the wrong place left alone", {{"file", file.string()}});
        continue;
      }
      records_[{record->alloc_id, record->volume_id}] = std::move(*record);
    }
  }
  if (ec) return domain::error("cannot list " + dir_.string() + ": " + ec.message());
  return {};
}

std::optional<MountRecord> MountRecordStore::get(const std::string& alloc_id, const std::string& volume_id) const {
  auto it = records_.find({alloc_id, volume_id});
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

std::vector<MountRecord> MountRecordStore::all() const {
  std::vector<MountRecord> out;
  for (const auto& [key, r] : records_) out.push_back(r);
  return out;
}

std::vector<MountRecord> MountRecordStore::for_volume(const std::string& volume_id) const {
  std::vector<MountRecord> out;
  for (const auto& [key, r] : records_) {
    if (key.second == volume_id) out.push_back(r);
  }
  return out;
}

std::vector<MountRecord> MountRecordStore::for_alloc(const std::string& alloc_id) const {
  std::vector<MountRecord> out;
  for (auto it = records_.lower_bound({alloc_id, ""}); it != records_.end() && it->first.first == alloc_id; ++it) {
    out.push_back(it->second);
  }
  return out;
}

domain::Status MountRecordStore::put(MountRecord& record) {
  auto file = file_of(record.alloc_id, record.volume_id);
  if (!file) return domain::error(file.error());
  const auto known = records_.find({record.alloc_id, record.volume_id});
  if (known == records_.end()) {  // a new record; a known one's directory exists already
    if (auto s = make_dir(dir_); !s) return s;
    if (auto s = make_dir(file->parent_path()); !s) return s;
  }
  // `notify` is sticky: a release may mark a record while an operation holding an older copy of
  // it is in flight, and that operation's next write must not undo the release.
  if (known != records_.end() && known->second.notify) record.notify = true;
  record.updated_unix_ms = now_unix_ms();
  if (auto ec = durable::write_durable(*file, encode(record)))
    return domain::error("cannot write " + file->string() + ": " + ec.message());
  records_[{record.alloc_id, record.volume_id}] = record;
  return {};
}

domain::Status MountRecordStore::remove(const std::string& alloc_id, const std::string& volume_id) {
  auto file = file_of(alloc_id, volume_id);
  if (!file) return domain::error(file.error());
  if (auto ec = durable::remove_durable(*file)) return domain::error("cannot remove " + file->string() + ": " + ec.message());
  // The allocation's directory goes with its last record (rmdir fails while others remain).
  if (::rmdir(file->parent_path().c_str()) == 0) durable::sync_dir(dir_);
  records_.erase({alloc_id, volume_id});
  return {};
}

}  // namespace mooring::nodeagent
