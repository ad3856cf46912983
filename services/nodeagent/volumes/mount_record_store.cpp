#include "services/nodeagent/volumes/mount_record_store.hpp"

#include "shared/domain/ids.hpp"
#include "shared/durable/durable_file.hpp"
#include "shared/durable/journal.hpp"
#include "shared/log/log.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

namespace mooring::nodeagent {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const log::Logger kLog{"mount-records"};
constexpr std::string_view kLegacySuffix = ".json";
constexpr std::string_view kLegacyTempSuffix = ".json.tmp";
// A journal longer than this and than the checkpoint is folded into a new checkpoint.
constexpr std::uint64_t kCompactBytes = 64ull * 1024;

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

domain::Status validate_key(const std::string& alloc_id, const std::string& volume_id) {
  if (auto s = domain::validate_allocation_id(alloc_id); !s) return s;
  return domain::validate_volume_key(volume_id);
}

}  // namespace

// Touched by the worker thread only, and by load() before the first write.
struct MountRecordStore::Disk {
  explicit Disk(const fs::path& dir)
      : checkpoint(dir / "mounts.json"), journal_path(dir / "mounts.journal"), journal(journal_path) {}

  fs::path checkpoint;
  fs::path journal_path;
  durable::Journal journal;
  std::uint64_t checkpoint_bytes = 0;
  std::map<Key, std::string> records;  // what checkpoint + journal hold, encoded
  bool read = false;                   // the files were read (by load(), or by the first flush)

  // One change, as the journal holds it: the record's text, or none when removed.
  void apply(const Key& key, std::optional<std::string> text) {
    if (text) {
      records[key] = std::move(*text);
    } else {
      records.erase(key);
    }
  }

  // Reads the checkpoint and the journal into `records`.
  domain::Status read_files() {
    std::error_code ec;
    fs::create_directories(checkpoint.parent_path(), ec);
    if (ec) return domain::error("cannot create " + checkpoint.parent_path().string() + ": " + ec.message());
    durable::Version version;
    const auto text = durable::read_durable(checkpoint, ec, &version);
    if (ec) return domain::error("cannot read " + checkpoint.string() + ": " + ec.message());
    records.clear();
    try {
      if (text) {
        const json parsed = json::parse(*text);
        for (const auto& r : parsed.at("records")) {
          records[{r.at("alloc_id").get<std::string>(), r.at("volume_id").get<std::string>()}] = r.dump();
        }
      }
      journal.rewind();
      std::vector<std::string> changes;
      if (auto jec = journal.read_new(version.generation, changes))
        return domain::error("cannot read " + journal_path.string() + ": " + jec.message());
      for (const auto& change : changes) {
        for (const auto& c : json::parse(change)) {
          apply({c.at(0).get<std::string>(), c.at(1).get<std::string>()},
                c.at(2).is_null() ? std::nullopt : std::optional<std::string>(c.at(2).dump()));
        }
      }
    } catch (const json::exception& e) {
      return domain::error("mount records in " + checkpoint.parent_path().string() + " are corrupt: " + e.what());
    }
    checkpoint_bytes = text ? text->size() : 0;
    read = true;
    return {};
  }

  // Writes every record into a new checkpoint and restarts the journal after it.
  domain::Status compact() {
    std::string text = "{\"records\":[";
    bool first = true;
    for (const auto& [key, record] : records) {
      if (!first) text += ',';
      first = false;
      text += record;
    }
    text += "]}";
    durable::Version version;
    if (auto ec = durable::write_durable(checkpoint, text, &version))
      return domain::error("cannot write " + checkpoint.string() + ": " + ec.message());
    // The checkpoint holds every record now; a crash before the restart leaves a journal that
    // names the previous generation, which is then read as empty.
    checkpoint_bytes = text.size();
    if (auto ec = journal.restart(version.generation))
      return domain::error("cannot restart " + journal_path.string() + ": " + ec.message());
    return {};
  }
};

MountRecordStore::MountRecordStore(fs::path dir)
    : dir_(std::move(dir)),
      disk_(std::make_unique<Disk>(dir_)),
      worker_(std::make_unique<async::SerialWorker>("mount-records")) {}

MountRecordStore::~MountRecordStore() = default;

domain::Status MountRecordStore::load() {
  records_.clear();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return domain::error("cannot create " + dir_.string() + ": " + ec.message());
  worker_->wait_drained();  // the disk side is ours until the next write
  if (auto s = disk_->read_files(); !s) return s;
  for (const auto& [key, text] : disk_->records) {
    auto record = decode_mount_record(text);
    if (!record) return domain::error("mount record of " + key.second + " in " + dir_.string() + ": " + record.error());
    records_[key] = Entry{std::move(*record), 0};
  }

  // Per-record files of an older agent ({alloc}/{volume}.json): into the checkpoint, then gone.
  std::vector<fs::path> migrated;
  for (const auto& alloc_dir : fs::directory_iterator(dir_, ec)) {
    if (!alloc_dir.is_directory()) continue;
    std::error_code inner;
    for (const auto& entry : fs::directory_iterator(alloc_dir.path(), inner)) {
      // "<volume>.json.tmp[.<pid>.<n>]": an interrupted write (no rename happened).
      if (entry.path().filename().string().find(kLegacyTempSuffix) != std::string::npos)
        fs::remove(entry.path(), inner);
    }
    for (const auto& file : durable::list_durable(alloc_dir.path(), kLegacySuffix)) {
      std::error_code rec;
      const auto text = durable::read_durable(file, rec);
      auto record = text ? decode_mount_record(*text) : domain::Expected<MountRecord>(domain::error(rec.message()));
      if (!record) {
        kLog.error("unreadable mount record left in place", {{"file", file.string()}, {"error", record.error()}});
        continue;
      }
      if (!validate_key(record->alloc_id, record->volume_id) || alloc_dir.path().filename() != record->alloc_id ||
          file.filename() != record->volume_id + std::string(kLegacySuffix)) {
        kLog.error("mount record in the wrong place left alone", {{"file", file.string()}});
        continue;
      }
      migrated.push_back(file);
      Key key{record->alloc_id, record->volume_id};
      // A crash part way through an earlier migration: the checkpoint has it already.
      if (records_.contains(key)) continue;
      disk_->records[key] = encode(*record);
      records_[key] = Entry{std::move(*record), 0};
    }
  }
  if (ec) return domain::error("cannot list " + dir_.string() + ": " + ec.message());
  if (!migrated.empty()) {
    if (auto s = disk_->compact(); !s) return s;
    for (const auto& file : migrated) {
      if (auto rec = durable::remove_durable(file))
        kLog.error("cannot remove a migrated mount record", {{"file", file.string()}, {"error", rec.message()}});
      if (::rmdir(file.parent_path().c_str()) == 0) durable::sync_dir(dir_);
    }
    kLog.info("mount records moved into the journal", {{"records", static_cast<int64_t>(migrated.size())}});
  }
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

MountRecordStore::Queued MountRecordStore::enqueue(Key key, std::optional<std::string> text,
                                                   std::function<void()> undo) {
  auto result = std::make_shared<domain::Status>();
  std::lock_guard lock(pending_mutex_);
  pending_.push_back(Pending{std::move(key), std::move(text), result});
  return Queued{std::move(result), std::move(undo)};
}

domain::Expected<MountRecordStore::Queued> MountRecordStore::change_put(MountRecord& record) {
  if (auto s = validate_key(record.alloc_id, record.volume_id); !s) return domain::error(s.error());
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
  return enqueue(key, encode(record), [this, key, change, before = std::move(before)] {
    auto it = records_.find(key);
    if (it == records_.end() || it->second.change != change) return;  // a newer change stands
    if (before) {
      it->second = *before;
    } else {
      records_.erase(it);
    }
  });
}

domain::Expected<MountRecordStore::Queued> MountRecordStore::change_remove(const std::string& alloc_id,
                                                                           const std::string& volume_id) {
  if (auto s = validate_key(alloc_id, volume_id); !s) return domain::error(s.error());
  const Key key{alloc_id, volume_id};
  std::optional<Entry> before;
  if (auto known = records_.find(key); known != records_.end()) {
    before = std::move(known->second);
    records_.erase(known);
  }
  ++changes_;
  return enqueue(key, std::nullopt, [this, key, before = std::move(before)] {
    if (before && !records_.contains(key)) records_[key] = *before;  // unless put again since
  });
}

asio::awaitable<domain::Status> MountRecordStore::written(domain::Expected<Queued> queued) {
  if (!queued) co_return domain::error(queued.error());
  // Runs after every flush queued before it; the one that took this change set its result.
  co_await worker_->run([this] { flush(); });
  if (!*queued->result) queued->undo();  // back on the executor: memory is ours again
  co_return *queued->result;
}

// Coroutines, so the change is made when the caller awaits it, not when it calls.
asio::awaitable<domain::Status> MountRecordStore::put(MountRecord& record) {
  co_return co_await written(change_put(record));
}

void MountRecordStore::submit(MountRecord record) {
  if (auto queued = change_put(record); !queued) {
    kLog.error("cannot record a mount change",
               {{"volume", record.volume_id}, {"alloc", record.alloc_id}, {"error", queued.error()}});
    return;
  }
  worker_->submit([this] { flush(); });  // a failure is logged there
}

asio::awaitable<domain::Status> MountRecordStore::remove(const std::string& alloc_id, const std::string& volume_id) {
  co_return co_await written(change_remove(alloc_id, volume_id));
}

void MountRecordStore::flush() {
  std::vector<Pending> batch;
  {
    std::lock_guard lock(pending_mutex_);
    batch.swap(pending_);
  }
  if (batch.empty()) return;  // an earlier flush took them
  domain::Status status;
  if (!disk_->read) status = disk_->read_files();  // written before any load(): find the journal's end
  if (status) {
    std::string change = "[";
    for (const auto& p : batch) {
      if (change.size() > 1) change += ',';
      change += '[' + json(p.key.first).dump() + ',' + json(p.key.second).dump() + ',' + p.text.value_or("null") + ']';
    }
    change += ']';
    if (auto ec = disk_->journal.append(change)) {
      status = domain::error("cannot write " + disk_->journal_path.string() + ": " + ec.message());
    }
  }
  if (!status) {
    kLog.error("mount records not written",
               {{"changes", static_cast<int64_t>(batch.size())}, {"error", status.error()}});
    // The journal may hold them or not: read it again before the next append.
    disk_->read = false;
  } else {
    for (auto& p : batch) disk_->apply(p.key, std::move(p.text));
    // The changes are durable; a failed compaction is retried after the next flush (the journal
    // still holds everything) and is no change's failure.
    if (disk_->journal.record_bytes() > std::max(kCompactBytes, disk_->checkpoint_bytes)) {
      if (auto s = disk_->compact(); !s) kLog.warn("mount records not compacted", {{"error", s.error()}});
    }
  }
  for (auto& p : batch) *p.result = status;
}

}  // namespace mooring::nodeagent
