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

class VolumeStore {
 public:
  explicit VolumeStore(std::filesystem::path data_dir);

  // Creates the directory layout; an error message when the data dir is unusable.
  std::string prepare();

  std::filesystem::path volumes_dir() const { return data_dir_ / "volumes"; }
  std::filesystem::path snapshots_dir() const { return data_dir_ / "snapshots"; }

  // Runs fn on the freshest state under the store lock; persists the result when fn returns OK
  // and changed something. fn may do file work (copy a directory); the lock keeps it atomic.
  grpc::Status transact(const std::function<grpc::Status(StoreState&)>& fn);

  // A consistent copy of the current state (status INTERNAL when the file is unreadable).
  grpc::Status read(StoreState& out);

 private:
  grpc::Status load_locked(StoreState& out);

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
