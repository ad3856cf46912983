// mooring-hostpath: the controller's durable catalogue of volumes, snapshots and publications.
// Lives in <data-dir>/controller-state.json; every change is a transaction under an in-process
// mutex plus an flock, re-reading the file first, so a restarted plugin (or a second plugin
// process sharing the data dir) always sees the latest acknowledged state.
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
  std::string source_snapshot_id;  // content source, at most one of the two
  std::string source_volume_id;
  std::vector<StringMap> topology;  // accessible_topology segments
  std::vector<Publication> publications;
  std::int64_t created_unix_ms = 0;
  bool operator==(const VolumeRecord&) const = default;
};

struct SnapshotRecord {
  std::string id;
  std::string name;
  std::string source_volume_id;
  std::int64_t size_bytes = 0;
  std::string path;
  std::int64_t created_unix_ns = 0;
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
  // file is unreadable; fn is not called then). Nothing is copied.
  grpc::Status read(const std::function<grpc::Status(const StoreState&)>& fn);

 private:
  // Brings cached_state_ up to the file.
  grpc::Status load_locked();

  // The state file as this process last read or wrote it, and which slot and generation that
  // was (generation 0: nothing cached). Every write by any plugin process sharing the data dir
  // raises the generation, so an unchanged one means the cached state is the file's: no
  // re-parse per call.
  bool cache_current() const;
  durable::Version version_;
  StoreState cached_state_;
  // Each record's encoded text as in the file: a change re-encodes only the records it touched,
  // and the file is their concatenation (a publish among 1000 volumes is not 1000 encodings).
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
