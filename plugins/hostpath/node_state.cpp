#include "plugins/hostpath/node_state.hpp"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "shared/durable/durable_file.hpp"

namespace mooring::hostpath {
namespace {

using nlohmann::json;

json encode(const NodeRecord& r) {
  json staged = json::object();
  for (const auto& [path, s] : r.staged) {
    staged[path] = {{"volume_id", s.volume_id},
                    {"source", s.source},
                    {"readonly", s.readonly},
                    {"block", s.block},
                    {"device", s.device}};
  }
  json published = json::object();
  for (const auto& [path, p] : r.published) {
    published[path] = {{"volume_id", p.volume_id}, {"staging_path", p.staging_path},
                       {"readonly", p.readonly},   {"access_mode", p.access_mode},
                       {"block", p.block},         {"device", p.device}};
  }
  return {{"node_id", r.registration.node_id},
          {"max_volumes", r.registration.max_volumes},
          {"max_volumes_file", r.registration.max_volumes_file},
          {"topology", r.registration.topology},
          {"staged", staged},
          {"published", published}};
}

bool decode(const std::string& text, NodeRecord& r) {
  try {
    const json j = json::parse(text);
    r.registration.node_id = j.at("node_id").get<std::string>();
    r.registration.max_volumes = j.value("max_volumes", std::int64_t{0});
    r.registration.max_volumes_file = j.value("max_volumes_file", "");
    r.registration.topology = j.value("topology", std::map<std::string, std::string>{});
    const json staged = j.value("staged", json::object());
    const json published = j.value("published", json::object());
    for (const auto& [path, s] : staged.items()) {
      r.staged[path] = {s.at("volume_id").get<std::string>(), s.value("source", ""), s.value("readonly", false),
                        s.value("block", false), s.value("device", "")};
    }
    for (const auto& [path, p] : published.items()) {
      r.published[path] = {p.at("volume_id").get<std::string>(),
                           p.value("staging_path", ""),
                           p.value("readonly", false),
                           p.value("access_mode", 0),
                           p.value("block", false),
                           p.value("device", "")};
    }
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

}  // namespace

NodeState::NodeState(std::filesystem::path data_dir, NodeRegistration registration)
    : file_(data_dir / "nodes" / (registration.node_id + ".json")) {
  record_.registration = std::move(registration);
}

std::string NodeState::open() {
  std::lock_guard guard(mu_);
  std::error_code ec;
  std::filesystem::create_directories(file_.parent_path(), ec);
  if (ec) return "cannot create " + file_.parent_path().string() + ": " + ec.message();
  if (const auto text = durable::read_durable(file_, ec)) {
    NodeRecord old;
    if (!decode(*text, old)) return "node state file " + file_.string() + " is corrupt";
    record_.staged = std::move(old.staged);
    record_.published = std::move(old.published);
  } else if (ec) {
    return "cannot read " + file_.string() + ": " + ec.message();
  }
  if (!save_locked()) return "cannot write " + file_.string();
  return {};
}

NodeRecord NodeState::snapshot() const {
  std::lock_guard guard(mu_);
  return record_;
}

std::string NodeState::text_locked() const { return encode(record_).dump(2) + "\n"; }

bool NodeState::save_locked() { return !durable::write_durable(file_, text_locked(), &version_); }

bool NodeState::commit(std::unique_lock<std::mutex>& lock) {
  const auto mine = ++changes_;
  while (written_ < mine) {
    if (writing_) {
      written_cv_.wait(lock);
      continue;
    }
    writing_ = true;
    const auto upto = changes_;
    const auto text = text_locked();
    lock.unlock();
    const bool ok = !durable::write_durable(file_, text, &version_);
    lock.lock();
    writing_ = false;
    if (ok) written_ = std::max(written_, upto);
    written_cv_.notify_all();
    if (!ok) return false;  // a waiter whose change this write carried tries again itself
  }
  return true;
}

bool NodeState::put_staged(const std::string& path, const StagedVolume& v) {
  std::unique_lock lock(mu_);
  record_.staged[path] = v;
  return commit(lock);
}

bool NodeState::erase_staged(const std::string& path) {
  std::unique_lock lock(mu_);
  if (record_.staged.erase(path) == 0) return true;
  return commit(lock);
}

bool NodeState::put_published(const std::string& path, const PublishedVolume& v) {
  std::unique_lock lock(mu_);
  record_.published[path] = v;
  return commit(lock);
}

bool NodeState::erase_published(const std::string& path) {
  std::unique_lock lock(mu_);
  if (record_.published.erase(path) == 0) return true;
  return commit(lock);
}

namespace {

std::vector<NodeRecord> all_records(const std::filesystem::path& data_dir) {
  std::vector<NodeRecord> out;
  for (const auto& file : durable::list_durable(data_dir / "nodes", ".json")) {
    std::error_code rec;
    const auto text = durable::read_durable(file, rec);
    NodeRecord r;
    if (text && decode(*text, r)) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::int64_t current_max_volumes(const NodeRegistration& node) {
  if (node.max_volumes_file.empty()) return node.max_volumes;
  std::ifstream in(node.max_volumes_file);
  std::int64_t n = -1;
  if (in >> n && n >= 0) return n;
  return node.max_volumes;
}

std::vector<NodeRegistration> registered_nodes(const std::filesystem::path& data_dir) {
  std::vector<NodeRegistration> out;
  for (auto& r : all_records(data_dir)) out.push_back(std::move(r.registration));
  return out;
}

std::vector<std::string> nodes_mounting(const std::filesystem::path& data_dir, const std::string& volume_id) {
  std::vector<std::string> out;
  for (const auto& r : all_records(data_dir)) {
    bool uses = false;
    for (const auto& [path, s] : r.staged) uses = uses || s.volume_id == volume_id;
    for (const auto& [path, p] : r.published) uses = uses || p.volume_id == volume_id;
    if (uses) out.push_back(r.registration.node_id);
  }
  return out;
}

}  // namespace mooring::hostpath
