// mooring-hostpath: the controller's durable catalogue of volumes, snapshots and publications.
// Every change is a transaction under an in-process mutex plus an flock, catching up with the
// files first, so a restarted plugin (or a second plugin process sharing the data dir) always
// sees the latest acknowledged state.
//
// On disk: <data-dir>/controller-state.json, a checkpoint of the whole catalogue (durable slot
// file), and <data-dir>/controller-journal, the changes since, one record per transaction (the
// records it touched, each whole, or null when erased) flushed with one fdatasync. A publish
// among 1000 volumes writes a few hundred bytes, not the catalogue. When the journal outgrows the
// checkpoint, the transaction writes a new checkpoint and restarts the journal (compaction), so
// the bytes written per change stay constant on average, whatever the catalogue's size.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "shared/durable/durable_file.hpp"
#include "shared/durable/journal.hpp"

namespace mooring::hostpath {

using StringMap = std::map<std::string, std::string>;

struct Publication {
  std::string node_id;
  bool readonly = false;
  int access_mode = 0;  // csi.v1 VolumeCapability.AccessMode.Mode
  bool operator==(const Publication&) const = default;
};

struct VolumeRecord {
  std::string id;
  std::string name;
  std::int64_t capacity_bytes = 0;
  std::string path;  // the volume's directory
  StringMap parameters;
  StringMap mutable_parameters;    // CSI 1.12: set at create, changed by ControllerModifyVolume
  std::string source_snapshot_id;  // content source, at most one of the two
  std::string source_volume_id;
  std::vector<StringMap> topology;  // accessible_topology segments
  std::vector<Publication> publications;
  std::int64_t created_unix_ms = 0;
  bool block = false;  // a block volume: <path>/block.img, attached to a loop device on the node
  bool operator==(const VolumeRecord&) const = default;
};

struct SnapshotRecord {
  std::string id;
  std::string name;
  std::string source_volume_id;
  std::int64_t size_bytes = 0;
  std::string path;
  std::int64_t created_unix_ns = 0;
  // A member of a group snapshot (CreateVolumeGroupSnapshot): the group's id and name. A member
  // has no name of its own, so CreateSnapshot's idempotency never matches it, and it is deleted
  // only with its group.
  std::string group_snapshot_id;
  std::string group_name;
  bool operator==(const SnapshotRecord&) const = default;
};

struct StoreState {
  std::map<std::string, VolumeRecord> volumes;      // by id
  std::map<std::string, SnapshotRecord> snapshots;  // by id
};

// JSON codec of the state file (exposed for tests).
std::string encode_state(const StoreState& state);
bool decode_state(std::string_view text, StoreState& out, std::string& error);

// One transaction's view of the catalogue. Reads see the current state, this transaction's own
// changes included; every change names its record, so the commit re-encodes exactly those and
// nothing is copied or compared per call (a publish among 10,000 volumes touches one record).
class StoreTxn {
 public:
  const StoreState& state() const { return state_; }

  // The record to change in place; nullptr when there is none.
  VolumeRecord* edit_volume(const std::string& id);
  void put_volume(VolumeRecord v);
  void erase_volume(const std::string& id);
  void put_snapshot(SnapshotRecord s);
  void erase_snapshot(const std::string& id);

 private:
  friend class VolumeStore;
  explicit StoreTxn(StoreState& state) : state_(state) {}
  bool changed() const { return !volumes_.empty() || !snapshots_.empty(); }

  StoreState& state_;
  std::set<std::string> volumes_, snapshots_;  // ids touched
};

class VolumeStore {
 public:
  explicit VolumeStore(std::filesystem::path data_dir);

  // Creates the directory layout; an error message when the data dir is unusable.
  std::string prepare();

  std::filesystem::path volumes_dir() const { return data_dir_ / "volumes"; }
  std::filesystem::path snapshots_dir() const { return data_dir_ / "snapshots"; }

  // Runs fn on the freshest state under the store lock; persists the records it changed when it
  // returns OK. A failed fn or write changes nothing: the cache is dropped and the file, which
  // was not written, is read again. fn may do file work (copy a directory); the lock keeps the
  // transaction atomic.
  grpc::Status transact(const std::function<grpc::Status(StoreTxn&)>& fn);

  // Runs fn on the current state under the store lock and returns its status (INTERNAL when the
  // files are unreadable; fn is not called then). Nothing is copied.
  grpc::Status read(const std::function<grpc::Status(const StoreState&)>& fn);

  // Writes the whole catalogue to the checkpoint and restarts the journal. Transactions do this
  // themselves when the journal outgrows the checkpoint (at least kCompactBytes).
  grpc::Status compact();
  static constexpr std::uint64_t kCompactBytes = 64ull * 1024;

 private:
  std::filesystem::path checkpoint_path() const { return data_dir_ / "controller-state.json"; }
  // Brings cached_state_ up to the files: the checkpoint when another process wrote one, then
  // the journal records appended since the last look.
  grpc::Status load_locked();
  grpc::Status apply_record(std::string_view text);
  grpc::Status compact_locked();

  // The cache matches the files up to the journal's read position; false until the first load
  // and after any failure, so the next call reads the checkpoint again.
  bool loaded_ = false;
  std::uint64_t checkpoint_seen_ = 0;  // generation_of(checkpoint) when it was read or written
  std::uint64_t checkpoint_bytes_ = 0;
  durable::Version version_;  // the checkpoint's valid generation and slot
  durable::Journal journal_;
  StoreState cached_state_;
  // Each record's encoded text: a change encodes only the records it touched, the journal record
  // is made of those texts, and a checkpoint is their concatenation.
  struct EncodedState {
    std::map<std::string, std::string> volumes, snapshots;  // id -> the record's JSON text
  };
  static EncodedState encode_records(const StoreState& state);
  static std::string assemble(const EncodedState& encoded);
  friend std::string encode_state(const StoreState& state);
  EncodedState cached_text_;
  std::filesystem::path data_dir_;
  std::mutex mu_;
};

}  // namespace mooring::hostpath
