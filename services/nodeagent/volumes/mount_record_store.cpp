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

namespace asio = boost::asio;
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

MountRecordStore::MountRecordStore(fs::path dir)
    : dir_(std::move(dir)), worker_(std::make_unique<async::SerialWorker>("mount-records")) {}

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
      Key key{record->alloc_id, record->volume_id};  // before the move below (C++17: right side first)
      records_[std::move(key)] = Entry{std::move(*record), 0};
    }
  }
  if (ec) return domain::error("cannot list " + dir_.string() + ": " + ec.message());
  return {};
}

std::optional<MountRecord> MountRecordStore::get(const std::string& alloc_id, const std::string& volume_id) const {
  auto it = records_.find({alloc_id, volume_id});
  if (it == records_.end()) return std::nullopt;
  return it->second.record;
}

std::vector<MountRecord> MountRecordStore::all() const {
  std::vector<MountRecord> out;
  for (const auto& [key, e] : records_) out.push_back(e.record);
  return out;
}

std::vector<MountRecord> MountRecordStore::for_volume(const std::string& volume_id) const {
  std::vector<MountRecord> out;
  for (const auto& [key, e] : records_) {
    if (key.second == volume_id) out.push_back(e.record);
  }
  return out;
}

std::vector<MountRecord> MountRecordStore::for_alloc(const std::string& alloc_id) const {
  std::vector<MountRecord> out;
  for (auto it = records_.lower_bound({alloc_id, ""}); it != records_.end() && it->first.first == alloc_id; ++it) {
    out.push_back(it->second.record);
  }
  return out;
}

domain::Expected<MountRecordStore::Change> MountRecordStore::prepare_put(MountRecord& record) {
  auto file = file_of(record.alloc_id, record.volume_id);
  if (!file) return domain::error(file.error());
  const Key key{record.alloc_id, record.volume_id};
  std::optional<Entry> before;
  if (auto known = records_.find(key); known != records_.end()) {
    before = known->second;
    // `notify` is sticky: a release may mark a record while an operation holding an older copy
    // of it is in flight, and that operation's next write must not undo the release.
    if (known->second.record.notify) record.notify = true;
  }
  record.updated_unix_ms = now_unix_ms();
  const auto change = ++changes_;
  records_[key] = Entry{record, change};
  Change c;
  c.write = [root = dir_, file = std::move(*file), text = encode(record)]() -> domain::Status {
    // The allocation's directory (and the store's) may not exist yet, or may have gone with a
    // removal queued before this write.
    const auto parent = file.parent_path();
    if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
      if (errno != ENOENT) return domain::error(errno_text("cannot create", parent));
      if (auto s = make_dir(root); !s) return s;
      if (auto s = make_dir(parent); !s) return s;
    }
    if (auto ec = durable::write_durable(file, text))
      return domain::error("cannot write " + file.string() + ": " + ec.message());
    return {};
  };
  c.undo = [this, key, change, before = std::move(before)] {
    auto it = records_.find(key);
    if (it == records_.end() || it->second.change != change) return;  // a newer change stands
    if (before) {
      it->second = *before;
    } else {
      records_.erase(it);
    }
  };
  return c;
}

domain::Expected<MountRecordStore::Change> MountRecordStore::prepare_remove(const std::string& alloc_id,
                                                                            const std::string& volume_id) {
  auto file = file_of(alloc_id, volume_id);
  if (!file) return domain::error(file.error());
  const Key key{alloc_id, volume_id};
  std::optional<Entry> before;
  if (auto known = records_.find(key); known != records_.end()) {
    before = std::move(known->second);
    records_.erase(known);
  }
  ++changes_;
  Change c;
  c.write = [root = dir_, file = std::move(*file)]() -> domain::Status {
    if (auto ec = durable::remove_durable(file)) return domain::error("cannot remove " + file.string() + ": " + ec.message());
    // The allocation's directory goes with its last record (rmdir fails while others remain).
    if (::rmdir(file.parent_path().c_str()) == 0) durable::sync_dir(root);
    return {};
  };
  c.undo = [this, key, before = std::move(before)] {
    if (before && !records_.contains(key)) records_[key] = *before;  // unless put again since
  };
  return c;
}

asio::awaitable<domain::Status> MountRecordStore::apply(Change change) {
  domain::Status status;
  co_await worker_->run([&] { status = change.write(); });
  if (!status) change.undo();  // back on the executor: memory is ours again
  co_return status;
}

asio::awaitable<domain::Status> MountRecordStore::put(MountRecord& record) {
  auto change = prepare_put(record);
  if (!change) co_return domain::error(change.error());
  co_return co_await apply(std::move(*change));
}

void MountRecordStore::submit(MountRecord record) {
  auto change = prepare_put(record);
  if (!change) {
    kLog.error("cannot record a mount change", {{"volume", record.volume_id}, {"alloc", record.alloc_id}, {"error", change.error()}});
    return;
  }
  worker_->submit([write = std::move(change->write), alloc = record.alloc_id, volume = record.volume_id] {
    if (auto s = write(); !s) kLog.error("cannot record a mount change", {{"volume", volume}, {"alloc", alloc}, {"error", s.error()}});
  });
}

asio::awaitable<domain::Status> MountRecordStore::remove(const std::string& alloc_id, const std::string& volume_id) {
  auto change = prepare_remove(alloc_id, volume_id);
  if (!change) co_return domain::error(change.error());
  co_return co_await apply(std::move(*change));
}

}  // namespace mooring::nodeagent
