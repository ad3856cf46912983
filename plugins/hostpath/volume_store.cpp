#include "plugins/hostpath/volume_store.hpp"

#include <algorithm>
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
          {"mutable_parameters", v.mutable_parameters},
          {"source_snapshot_id", v.source_snapshot_id},
          {"source_volume_id", v.source_volume_id},
          {"topology", v.topology},
          {"publications", pubs},
          {"created_unix_ms", v.created_unix_ms},
          {"block", v.block}};
}

VolumeRecord volume_from_json(const json& j) {
  VolumeRecord v;
  v.id = j.at("id").get<std::string>();
  v.name = j.at("name").get<std::string>();
  v.capacity_bytes = j.at("capacity_bytes").get<std::int64_t>();
  v.path = j.at("path").get<std::string>();
  v.parameters = j.value("parameters", StringMap{});
  v.mutable_parameters = j.value("mutable_parameters", StringMap{});
  v.source_snapshot_id = j.value("source_snapshot_id", "");
  v.source_volume_id = j.value("source_volume_id", "");
  v.topology = j.value("topology", std::vector<StringMap>{});
  for (const auto& p : j.value("publications", json::array())) {
    v.publications.push_back(
        {p.at("node_id").get<std::string>(), p.value("readonly", false), p.value("access_mode", 0)});
  }
  v.created_unix_ms = j.value("created_unix_ms", std::int64_t{0});
  v.block = j.value("block", false);
  return v;
}

json to_json(const SnapshotRecord& s) {
  json j = {{"id", s.id},
            {"name", s.name},
            {"source_volume_id", s.source_volume_id},
            {"size_bytes", s.size_bytes},
            {"path", s.path},
            {"created_unix_ns", s.created_unix_ns}};
  if (!s.group_snapshot_id.empty()) {  // absent for plain snapshots: older files read the same
    j["group_snapshot_id"] = s.group_snapshot_id;
    j["group_name"] = s.group_name;
  }
  return j;
}

SnapshotRecord snapshot_from_json(const json& j) {
  SnapshotRecord s;
  s.id = j.at("id").get<std::string>();
  s.name = j.at("name").get<std::string>();
  s.source_volume_id = j.at("source_volume_id").get<std::string>();
  s.size_bytes = j.at("size_bytes").get<std::int64_t>();
  s.path = j.at("path").get<std::string>();
  s.created_unix_ns = j.value("created_unix_ns", std::int64_t{0});
  s.group_snapshot_id = j.value("group_snapshot_id", "");
  s.group_name = j.value("group_name", "");
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

std::string encode_state(const StoreState& state) { return VolumeStore::assemble(VolumeStore::encode_records(state)); }

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

VolumeStore::VolumeStore(std::filesystem::path data_dir)
    : journal_(data_dir / "controller-journal"), data_dir_(std::move(data_dir)) {}

std::string VolumeStore::prepare() {
  std::error_code ec;
  for (const auto& dir : {data_dir_, volumes_dir(), snapshots_dir()}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return "cannot create " + dir.string() + ": " + ec.message();
  }
  return {};
}

grpc::Status VolumeStore::load_locked() {
  // Every checkpoint write, by any plugin process sharing the data dir, raises its generation;
  // an unchanged one means only the journal can have grown.
  const auto seen = durable::generation_of(checkpoint_path());
  if (!loaded_ || seen != checkpoint_seen_) {
    loaded_ = false;
    std::error_code ec;
    const auto text = durable::read_durable(checkpoint_path(), ec, &version_);
    if (ec) return {grpc::StatusCode::INTERNAL, "cannot read controller state: " + ec.message()};
    cached_state_ = {};
    cached_text_ = {};
    if (text) {
      std::string error;
      if (!decode_state(*text, cached_state_, error))
        return {grpc::StatusCode::INTERNAL, "controller state file is corrupt: " + error};
    }
    cached_text_ = encode_records(cached_state_);
    checkpoint_seen_ = seen;
    checkpoint_bytes_ = text ? text->size() : 0;
    journal_.rewind();
  }
  std::vector<std::string> records;
  if (const auto ec = journal_.read_new(version_.generation, records)) {
    loaded_ = false;
    return {grpc::StatusCode::INTERNAL, "cannot read controller journal: " + ec.message()};
  }
  for (const auto& record : records) {
    if (auto st = apply_record(record); !st.ok()) {
      loaded_ = false;
      return st;
    }
  }
  loaded_ = true;
  return grpc::Status::OK;
}

namespace {

// A journal record's changes to one kind of record: id -> the record's JSON, or null when erased.
template <class Record>
void apply_changes(const json& changes, Record (*from_json)(const json&), std::map<std::string, Record>& records,
                   std::map<std::string, std::string>& text) {
  for (const auto& [id, j] : changes.items()) {
    if (j.is_null()) {
      records.erase(id);
      text.erase(id);
    } else {
      auto rec = from_json(j);
      text.insert_or_assign(id, to_json(rec).dump());
      records.insert_or_assign(id, std::move(rec));
    }
  }
}

}  // namespace

grpc::Status VolumeStore::apply_record(std::string_view text) {
  try {
    const json j = json::parse(text);
    apply_changes(j.at("volumes"), &volume_from_json, cached_state_.volumes, cached_text_.volumes);
    apply_changes(j.at("snapshots"), &snapshot_from_json, cached_state_.snapshots, cached_text_.snapshots);
    return grpc::Status::OK;
  } catch (const json::exception& e) {
    return {grpc::StatusCode::INTERNAL, std::string("controller journal is corrupt: ") + e.what()};
  }
}

grpc::Status VolumeStore::compact() {
  std::lock_guard guard(mu_);
  FileLock lock(data_dir_ / "controller-state.lock");
  if (!lock.locked()) return {grpc::StatusCode::INTERNAL, "cannot lock the controller state in " + data_dir_.string()};
  if (auto st = load_locked(); !st.ok()) return st;
  return compact_locked();
}

grpc::Status VolumeStore::compact_locked() {
  const auto text = assemble(cached_text_);
  if (const auto ec = durable::write_durable(checkpoint_path(), text, &version_)) {
    loaded_ = false;
    return {grpc::StatusCode::INTERNAL, "cannot write controller state checkpoint: " + ec.message()};
  }
  checkpoint_seen_ = version_.generation;  // a write's generation is above every header's
  checkpoint_bytes_ = text.size();
  // The checkpoint holds every record now; a crash before the restart leaves a journal that
  // names the previous generation, which is then read as empty.
  if (const auto ec = journal_.restart(version_.generation)) {
    loaded_ = false;
    return {grpc::StatusCode::INTERNAL, "cannot restart controller journal: " + ec.message()};
  }
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

// Re-encodes the touched records into `text`, or drops the ones that are gone, and adds each to
// the journal record `out` ("id": text, or null when erased) as a member of `key`.
template <class Record>
void update_records(const std::set<std::string>& touched, const std::map<std::string, Record>& records,
                    std::map<std::string, std::string>& text, std::string_view key, std::string& out) {
  out += '"';
  out += key;
  out += "\":{";
  bool first = true;
  for (const auto& id : touched) {
    if (!first) out += ',';
    first = false;
    out += json(id).dump();
    out += ':';
    if (auto it = records.find(id); it != records.end()) {
      auto& encoded = text.insert_or_assign(id, to_json(it->second).dump()).first->second;
      out += encoded;
    } else {
      text.erase(id);
      out += "null";
    }
  }
  out += '}';
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
  // fn works on the cache itself. Until the record is flushed the cache counts as unloaded, so a
  // failure on the way makes the next call read the files again, which undoes what fn did.
  loaded_ = false;
  StoreTxn txn(cached_state_);
  const grpc::Status st = fn(txn);
  if (!txn.changed()) {
    loaded_ = true;
    return st;
  }
  if (!st.ok()) return st;
  std::string record = "{";
  update_records(txn.volumes_, cached_state_.volumes, cached_text_.volumes, "volumes", record);
  record += ',';
  update_records(txn.snapshots_, cached_state_.snapshots, cached_text_.snapshots, "snapshots", record);
  record += '}';
  if (const auto ec = journal_.append(record))
    return {grpc::StatusCode::INTERNAL, "cannot persist controller state: " + ec.message()};
  loaded_ = true;
  // The change is durable and acknowledged; a failed compaction is retried by the next change
  // (the journal still holds everything) and is not this call's failure.
  if (journal_.record_bytes() > std::max<std::uint64_t>(kCompactBytes, checkpoint_bytes_)) (void)compact_locked();
  return st;
}

grpc::Status VolumeStore::read(const std::function<grpc::Status(const StoreState&)>& fn) {
  std::lock_guard guard(mu_);
  FileLock lock(data_dir_ / "controller-state.lock");
  if (auto st = load_locked(); !st.ok()) return st;
  return fn(cached_state_);
}

}  // namespace mooring::hostpath
