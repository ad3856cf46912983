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

grpc::Status VolumeStore::load_locked(StoreState& out) {
  if (cache_current()) {
    out = cached_state_;
    return grpc::Status::OK;
  }
  std::error_code ec;
  const auto text = durable::read_durable(data_dir_ / "controller-state.json", ec, &version_);
  if (ec) return {grpc::StatusCode::INTERNAL, "cannot read controller state: " + ec.message()};
  if (!text) {
    out = {};
    cached_state_ = {};
    cached_text_ = {};
    return grpc::Status::OK;
  }
  std::string error;
  if (!decode_state(*text, out, error)) {
    version_ = {};  // nothing cached: the next call reads the file again
    return {grpc::StatusCode::INTERNAL, "controller state file is corrupt: " + error};
  }
  cached_state_ = out;
  cached_text_ = encode_records(out);
  return grpc::Status::OK;
}

namespace {

// Re-encodes the records that differ between `before` and `after` into `text`; true when any did.
template <class Record>
bool update_records(const std::map<std::string, Record>& before, const std::map<std::string, Record>& after,
                    std::map<std::string, std::string>& text) {
  bool changed = false;
  for (auto it = text.begin(); it != text.end();) {
    if (after.contains(it->first)) {
      ++it;
    } else {
      it = text.erase(it);
      changed = true;
    }
  }
  for (const auto& [id, record] : after) {
    auto old = before.find(id);
    if (old != before.end() && old->second == record) continue;  // `text` follows `before`
    text.insert_or_assign(id, to_json(record).dump());
    changed = true;
  }
  return changed;
}

}  // namespace

grpc::Status VolumeStore::transact(const std::function<grpc::Status(StoreState&)>& fn) {
  std::lock_guard guard(mu_);
  FileLock lock(data_dir_ / "controller-state.lock");
  if (!lock.locked()) return {grpc::StatusCode::INTERNAL, "cannot lock the controller state in " + data_dir_.string()};
  StoreState state;
  if (auto st = load_locked(state); !st.ok()) return st;
  grpc::Status st = fn(state);
  if (!st.ok()) return st;
  // The texts are updated in place; the version is forgotten meanwhile, so if the write fails
  // the next call re-reads the file and rebuilds them.
  auto version = std::exchange(version_, {});
  const bool volumes = update_records(cached_state_.volumes, state.volumes, cached_text_.volumes);
  const bool snapshots = update_records(cached_state_.snapshots, state.snapshots, cached_text_.snapshots);
  if (volumes || snapshots) {
    if (const auto ec = durable::write_durable(data_dir_ / "controller-state.json", assemble(cached_text_), &version))
      return {grpc::StatusCode::INTERNAL, "cannot persist controller state: " + ec.message()};
    cached_state_ = std::move(state);
  }
  version_ = version;
  return st;
}

grpc::Status VolumeStore::read(StoreState& out) {
  std::lock_guard guard(mu_);
  FileLock lock(data_dir_ / "controller-state.lock");
  return load_locked(out);
}

}  // namespace mooring::hostpath
