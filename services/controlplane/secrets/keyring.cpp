#include "services/controlplane/secrets/keyring.hpp"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "services/controlplane/secrets/sealer.hpp"
#include "shared/domain/text.hpp"
#include "shared/domain/time.hpp"
#include "shared/durable/durable_file.hpp"

namespace mooring::controlplane::secrets {
namespace {

using nlohmann::json;
constexpr const char* kFormat = "mooring-keyring/1";

}  // namespace

domain::Expected<Key> make_key() {
  auto material = random_bytes(32);
  auto id = random_bytes(8);
  if (!material || !id) return domain::error("cannot make a key: " + (material ? id.error() : material.error()));
  Key k;
  k.id = domain::to_hex(*id);
  std::memcpy(k.bytes.data(), material->data(), k.bytes.size());
  k.created = domain::format_time(domain::now());
  return k;
}

domain::Expected<Keyring> Keyring::load_or_new(const std::filesystem::path& path) {
  std::error_code ec;
  auto text = durable::read_file(path, ec);
  if (ec) return domain::error("cannot read keyring " + path.string() + ": " + ec.message());
  if (text) {
    auto ring = parse(*text, path);
    if (ring) ring->on_disk_ = true;
    return ring;
  }
  auto key = make_key();
  if (!key) return domain::error(key.error());
  Keyring ring;
  ring.path_ = path;
  ring.active_ = key->id;
  ring.keys_.push_back(std::move(*key));
  return ring;
}

domain::Expected<Keyring> Keyring::parse(const std::string& text, const std::filesystem::path& path) {
  auto fail = [&](const std::string& why) {
    return domain::error("keyring " + path.string() + " is not usable: " + why);
  };
  const auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not valid JSON");
  if (j.value("Format", "") != kFormat) return fail(std::string("field \"Format\" is not \"") + kFormat + "\"");
  Keyring ring;
  ring.path_ = path;
  const auto active = j.find("Active");
  if (active == j.end() || !active->is_string()) return fail("field \"Active\" must name a key");
  ring.active_ = active->get<std::string>();
  const auto keys = j.find("Keys");
  if (keys == j.end() || !keys->is_array() || keys->empty()) return fail("field \"Keys\" must be a non-empty list");
  for (const auto& k : *keys) {
    if (!k.is_object() || !k.contains("ID") || !k["ID"].is_string() || !k.contains("Key") || !k["Key"].is_string())
      return fail("every key needs string fields \"ID\" and \"Key\"");
    Key key;
    key.id = k["ID"].get<std::string>();
    if (key.id.empty() || key.id.find(':') != std::string::npos) return fail("key id \"" + key.id + "\" is not valid");
    auto material = base64_decode(k["Key"].get<std::string>());
    if (!material || material->size() != key.bytes.size())
      return fail("key \"" + key.id + "\" is not 32 bytes of base64");
    std::memcpy(key.bytes.data(), material->data(), key.bytes.size());
    if (k.contains("Created") && k["Created"].is_string()) key.created = k["Created"].get<std::string>();
    if (ring.find(key.id)) return fail("key \"" + key.id + "\" appears twice");
    ring.keys_.push_back(std::move(key));
  }
  if (!ring.find(ring.active_)) return fail("the active key \"" + ring.active_ + "\" is not among its keys");
  return ring;
}

Keyring Keyring::of(std::vector<Key> keys, std::string active, std::filesystem::path where) {
  Keyring ring;
  ring.keys_ = std::move(keys);
  ring.active_ = std::move(active);
  ring.path_ = std::move(where);
  ring.on_disk_ = true;  // nothing to save: they live where they came from
  return ring;
}

const Key& Keyring::active() const { return *find(active_); }

const Key* Keyring::find(const std::string& id) const {
  auto it = std::find_if(keys_.begin(), keys_.end(), [&](const Key& k) { return k.id == id; });
  return it == keys_.end() ? nullptr : &*it;
}

std::string Keyring::to_text() const {
  json keys = json::array();
  for (const auto& k : keys_) {
    const std::string material(reinterpret_cast<const char*>(k.bytes.data()), k.bytes.size());
    keys.push_back({{"ID", k.id}, {"Key", base64_encode(material)}, {"Created", k.created}});
  }
  return json{{"Format", kFormat}, {"Active", active_}, {"Keys", std::move(keys)}}.dump(2) + "\n";
}

domain::Status Keyring::save() {
  if (path_.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path_.parent_path(), ec);
  }
  if (auto ec = durable::write_file_atomically(path_, to_text()))
    return domain::error("cannot write keyring " + path_.string() + ": " + ec.message());
  on_disk_ = true;
  return {};
}

domain::Expected<std::string> Keyring::add_active_key() {
  auto key = make_key();
  if (!key) return domain::error(key.error());
  active_ = key->id;
  keys_.push_back(std::move(*key));
  return active_;
}

std::vector<std::string> Keyring::retire_inactive_keys() {
  std::vector<std::string> dropped;
  std::erase_if(keys_, [&](const Key& k) {
    if (k.id == active_) return false;
    dropped.push_back(k.id);
    return true;
  });
  return dropped;
}

}  // namespace mooring::controlplane::secrets
