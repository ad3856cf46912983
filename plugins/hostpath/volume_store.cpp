#include "plugins/hostpath/volume_store.hpp"

#include <utility>

#include <nlohmann/json.hpp>

#include "plugins/hostpath/state_file.hpp"
#include "shared/durable/durable_file.hpp"

namespace mooring::hostpath {
namespace {

using nlohmann::json;
constexpr int kFormatVersion = 1;

json to_json(const VolumeRecord& v) {
  json pubs = json::array();
  for (const auto& p : v.publications) {
    pubs.push_back({{"node_id", p.node_id}, {"readonly", p.readonly}, {"access_mode", p.access_mode}});
  }
  return {{"id", v.id},
          {"name", v.name},
          {"capacity_bytes", v.capacity_bytes},
          {"path", v.path},
          {"parameters", v.parameters},
          {"source_snapshot_id", v.source_snapshot_id},
          {"source_volume_id", v.source_volume_id},
          {"topology", v.topology},
          {"publications", pubs},
          {"created_unix_ms", v.created_unix_ms}};
}

VolumeRecord volume_from_json(const json& j) {
  VolumeRecord v;
  v.id = j.at("id").get<std::string>();
  v.name = j.at("name").get<std::string>();
  v.capacity_bytes = j.at("capacity_bytes").get<std::int64_t>();
  v.path = j.at("path").get<std::string>();
  v.parameters = j.value("parameters", StringMap{});
  v.source_snapshot_id = j.value("source_snapshot_id", "");
  v.source_volume_id = j.value("source_volume_id", "");
  v.topology = j.value("topology", std::vector<StringMap>{});
  for (const auto& p : j.value("publications", json::array())) {
    v.publications.push_back({p.at("node_id").get<std::string>(), p.value("readonly", false),
                              p.value("access_mode", 0)});
  }
  v.created_unix_ms = j.value("created_unix_ms", std::int64_t{0});
  return v;
}

json to_json(const SnapshotRecord& s) {
  return {{"id", s.id},
          {"name", s.name},
          {"source_volume_id", s.source_volume_id},
          {"size_bytes", s.size_bytes},
          {"path", s.path},
          {"created_unix_ns", s.created_unix_ns}};
}

SnapshotRecord snapshot_from_json(const json& j) {
  SnapshotRecord s;
  s.id = j.at("id").get<std::string>();
  s.name = j.at("name").get<std::string>();
  s.source_volume_id = j.at("source_volume_id").get<std::string>();
  s.size_bytes = j.at("size_bytes").get<std::int64_t>();
  s.path = j.at("path").get<std::string>();
  s.created_unix_ns = j.value("created_unix_ns", std::int64_t{0});
  return s;
}

}  // namespace

VolumeStore::EncodedState VolumeStore::encode_records(const StoreState& state) {
  EncodedState out;
  for (const auto& [id, v] : state.volumes) out.volumes.emplace(id, to_json(v).dump());
  for (const auto& [id, s] : state.snapshots) out.snapshots.emplace(id, to_json(s).dump());
  return out;
}

std::string VolumeStore::assemble(const EncodedState& encoded) {
  std::size_t size = 64;
  for (const auto& [id, text] : encoded.volumes) size += text.size() + 2;
  for (const auto& [id, text] : encoded.snapshots) size += text.size() + 2;
  std::string out;
  out.reserve(size);
  auto list = [&out](const std::map<std::string, std::string>& records) {
    out += '[';
    bool first = true;
    for (const auto& [id, text] : records) {
      if (!first) out += ",\n";
      first = false;
      out += text;
    }
    out += ']';
  };
  out += "{\"version\":" + std::to_string(kFormatVersion) + ",\n\"volumes\":";
  list(encoded.volumes);
  out += ",\n\"snapshots\":";
  list(encoded.snapshots);
  out += "}\n";
  return out;
}

std::string encode_state(const StoreState& state) {
  return VolumeStore::assemble(VolumeStore::encode_records(state));
}

bool decode_state(std::string_view text, StoreState& out, std::string& error) {
  out = {};
  try {
    const json j = json::parse(text);
    if (j.value("version", 0) != kFormatVersion) {
      error = "unsupported state file version";
      return false;
    }
    for (const auto& v : j.at("volumes")) {
      auto rec = volume_from_json(v);
      out.volumes.emplace(rec.id, std::move(rec));
    }
    for (const auto& s : j.at("snapshots")) {
      auto rec = snapshot_from_json(s);
      out.snapshots.emplace(rec.id, std::move(rec));
    }
    return true;
  } catch (const json::exception& e) {
    error = e.what();
    return false;
  }
}

VolumeStore::VolumeStore(std::filesystem::path data_dir) : data_dir_(std::move(data_dir)) {}

std::string VolumeStore::prepare() {
  std::error_code ec;
  for (const auto& dir : {data_dir_, volumes_dir(), snapshots_dir()}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return "cannot create " + dir.string() + ": " + ec.message();
  }
  return {};
}

bool VolumeStore::cache_current() const {
  // Every write, by any plugin process sharing the data dir, raises the generation.
  return version_.generation != 0 && durable::generation_of(data_dir_ / "controller-state.json") == version_.generation;
}

grpc::Status VolumeStore::load_locked() {
  if (cache_current()) return grpc::Status::OK;
  std::error_code ec;
  const auto text = durable::read_durable(data_dir_ / "controller-state.json", ec, &version_);
  if (ec) return {grpc::StatusCode::INTERNAL, "cannot read controller state: " + ec.message()};
  cached_state_ = {};
  cached_text_ = {};
  if (!text) return grpc::Status::OK;
  std::string error;
  if (!decode_state(*text, cached_state_, error)) {
    version_ = {};  // nothing cached: the next call reads the file again
    return {grpc::StatusCode::INTERNAL, "controller state file is corrupt: " + error};
  }
  cached_text_ = encode_records(cached_state_);
  return grpc::Status::OK;
}

namespace {

// A record put or erased by a transaction, and remembered as touched (erasing nothing touches nothing).
template <class Record>
void put_record(std::map<std::string, Record>& records, std::set<std::string>& touched, Record r) {
  touched.insert(r.id);
  auto id = r.id;
  records.insert_or_assign(std::move(id), std::move(r));
}

template <class Record>
void erase_record(std::map<std::string, Record>& records, std::set<std::string>& touched, const std::string& id) {
  if (records.erase(id) > 0) touched.insert(id);
}

// Re-encodes the touched records into `text`, or drops the ones that are gone.
template <class Record>
void update_records(const std::set<std::string>& touched, const std::map<std::string, Record>& records,
                    std::map<std::string, std::string>& text) {
  for (const auto& id : touched) {
    if (auto it = records.find(id); it != records.end()) {
      text.insert_or_assign(id, to_json(it->second).dump());
    } else {
      text.erase(id);
    }
  }
}

}  // namespace

VolumeRecord* StoreTxn::edit_volume(const std::string& id) {
  auto it = state_.volumes.find(id);
  if (it == state_.volumes.end()) return nullptr;
  volumes_.insert(id);
  return &it->second;
}

void StoreTxn::put_volume(VolumeRecord v) { put_record(state_.volumes, volumes_, std::move(v)); }
void StoreTxn::erase_volume(const std::string& id) { erase_record(state_.volumes, volumes_, id); }
void StoreTxn::put_snapshot(SnapshotRecord s) { put_record(state_.snapshots, snapshots_, std::move(s)); }
void StoreTxn::erase_snapshot(const std::string& id) { erase_record(state_.snapshots, snapshots_, id); }

grpc::Status VolumeStore::transact(const std::function<grpc::Status(StoreTxn&)>& fn) {
  std::lock_guard guard(mu_);
  FileLock lock(data_dir_ / "controller-state.lock");
  if (!lock.locked()) return {grpc::StatusCode::INTERNAL, "cannot lock the controller state in " + data_dir_.string()};
  if (auto st = load_locked(); !st.ok()) return st;
  // fn works on the cache itself. Until the write succeeds the version is forgotten, so a
  // failure on the way makes the next call re-read the file, which undoes what fn did.
  auto version = std::exchange(version_, {});
  StoreTxn txn(cached_state_);
  const grpc::Status st = fn(txn);
  if (!st.ok() && txn.changed()) return st;
  if (st.ok() && txn.changed()) {
    update_records(txn.volumes_, cached_state_.volumes, cached_text_.volumes);
    update_records(txn.snapshots_, cached_state_.snapshots, cached_text_.snapshots);
    if (const auto ec = durable::write_durable(data_dir_ / "controller-state.json", assemble(cached_text_), &version))
      return {grpc::StatusCode::INTERNAL, "cannot persist controller state: " + ec.message()};
  }
  version_ = version;
  return st;
}

grpc::Status VolumeStore::read(const std::function<grpc::Status(const StoreState&)>& fn) {
  std::lock_guard guard(mu_);
  FileLock lock(data_dir_ / "controller-state.lock");
  if (auto st = load_locked(); !st.ok()) return st;
  return fn(cached_state_);
}

}  // namespace mooring::hostpath
