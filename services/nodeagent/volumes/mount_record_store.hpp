// Where the mount records live: a checkpoint of every record ({dir}/mounts.json, a durable slot
// file) and a journal of the changes since ({dir}/mounts.journal), with an in-memory copy for
// queries. Agents before the journal kept one file per record ({dir}/{alloc}/{volume}.json);
// load() takes those into the checkpoint and removes them.
//
// The disk work runs on the store's own worker thread, so the agent's one executor thread never
// waits on a flush while other allocations queue behind it. Changes are appended to the journal
// in the order they were made, and every change waiting when the worker gets to one is appended
// with it, as one record and one fdatasync (group commit): under load the cost of a change does
// not grow with the number of allocations changing at once.
//
// Memory shows a change at once (a release() that marks a record while a mount's write is in
// flight builds on that write); the caller awaits put()/remove() before it acts on the change,
// so it never sends an RPC whose intent is not on disk. A write that fails is reported and its
// change taken back from memory, unless a newer change of the record came after it.
//
// Not thread-safe: used from the agent's executor only.
#pragma once

#include "services/nodeagent/volumes/mount_record.hpp"
#include "shared/async/serial_worker.hpp"
#include "shared/domain/result.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mooring::nodeagent {

class MountRecordStore {
 public:
  explicit MountRecordStore(std::filesystem::path dir);
  ~MountRecordStore();
  MountRecordStore(const MountRecordStore&) = delete;
  MountRecordStore& operator=(const MountRecordStore&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

  // Reads every record from disk (replacing the in-memory copy); call it before the first write.
  // Old per-record files that cannot be read or parsed are logged and left in place for an
  // operator: they are never deleted blindly, since they may name a live mount. Leftover temp
  // files of an interrupted write are removed.
  domain::Status load();

  std::optional<MountRecord> get(const std::string& alloc_id, const std::string& volume_id) const;
  std::vector<MountRecord> all() const;
  std::size_t size() const { return records_.size(); }
  std::vector<MountRecord> for_volume(const std::string& volume_id) const;
  std::vector<MountRecord> for_alloc(const std::string& alloc_id) const;

  // Updates memory with `record` (stamping updated_unix_ms) and completes once it is on disk.
  // A stored `notify = true` is kept even when `record` says false (see MountRecord::notify).
  boost::asio::awaitable<domain::Status> put(MountRecord& record);
  // The same write, not awaited (Postrun never waits on a disk); a failure is logged. Writes
  // land in order, so a later put() of the record completes after this one is on disk.
  void submit(MountRecord record);
  // Forgets the record and completes once that is on disk.
  boost::asio::awaitable<domain::Status> remove(const std::string& alloc_id, const std::string& volume_id);

  // The thread the records are written on. Other blocking file work of the mounts (creating and
  // removing their directories) runs there too, in order with the records.
  async::SerialWorker& worker() { return *worker_; }

  // Completes once every write asked for before the call is done (tests, shutdown).
  boost::asio::awaitable<void> durable() { return worker_->drained(); }
  void wait_durable() { worker_->wait_drained(); }

 private:
  using Key = std::pair<std::string, std::string>;  // (alloc, volume)
  struct Entry {
    MountRecord record;
    std::uint64_t change = 0;  // which change of the store put it there
  };
  // A change on its way to the journal: the record's encoded text, or none when removed.
  struct Pending {
    Key key;
    std::optional<std::string> text;
    std::shared_ptr<domain::Status> result;  // set by the flush that wrote it
  };
  struct Disk;  // the worker thread's side: journal, checkpoint, what they hold

  // A change made in memory and queued for the journal: its result once flushed, and how to
  // take it back from memory (on the executor) if the flush failed.
  struct Queued {
    std::shared_ptr<domain::Status> result;
    std::function<void()> undo;
  };
  domain::Expected<Queued> change_put(MountRecord& record);
  domain::Expected<Queued> change_remove(const std::string& alloc_id, const std::string& volume_id);
  Queued enqueue(Key key, std::optional<std::string> text, std::function<void()> undo);
  boost::asio::awaitable<domain::Status> written(domain::Expected<Queued> queued);
  void flush();  // on the worker: everything pending as one journal record

  std::filesystem::path dir_;
  std::map<Key, Entry> records_;
  std::uint64_t changes_ = 0;
  std::mutex pending_mutex_;
  std::vector<Pending> pending_;
  std::unique_ptr<Disk> disk_;
  std::unique_ptr<async::SerialWorker> worker_;  // last: drains the queue while the rest lives
};

}  // namespace mooring::nodeagent
