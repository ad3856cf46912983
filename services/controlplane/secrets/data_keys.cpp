#include "services/controlplane/secrets/data_keys.hpp"

#include <cstring>

#include <nlohmann/json.hpp>

#include "services/controlplane/secrets/sealer.hpp"

namespace mooring::controlplane::secrets {
namespace {

using nlohmann::json;
constexpr const char* kFormat = "mooring-data-keys/1";
constexpr const char* kWhere = "the state's data keys";

// Binds a wrapped key to its id: swapped with another entry it no longer opens.
std::string wrap_aad(const std::string& id) { return "mooring-data-key/v1|" + id; }

}  // namespace

domain::Expected<DataKeys> new_data_keys(const std::string& root_id, const std::string& id) {
  auto key = make_key();
  if (!key) return domain::error(key.error());
  if (!id.empty()) key->id = id;
  std::vector<Key> keys;
  std::string active = key->id;
  keys.push_back(std::move(*key));
  return DataKeys{Keyring::of(std::move(keys), std::move(active), kWhere), root_id};
}

domain::Expected<std::string> wrap_data_keys(const Keyring& data_keys, const Key& root) {
  json keys = json::array();
  for (const auto& k : data_keys.keys()) {
    const std::string material(reinterpret_cast<const char*>(k.bytes.data()), k.bytes.size());
    auto wrapped = seal(root, material, wrap_aad(k.id));
    if (!wrapped) return domain::error("wrapping data key \"" + k.id + "\": " + wrapped.error());
    keys.push_back({{"ID", k.id}, {"Created", k.created}, {"Wrapped", std::move(*wrapped)}});
  }
  return json{{"Format", kFormat}, {"Active", data_keys.active().id}, {"Keys", std::move(keys)}}.dump();
}

domain::Expected<DataKeys> unwrap_data_keys(const std::string& row, const Keyring& roots) {
  auto fail = [](const std::string& why) {
    return domain::error(std::string("state: keyring row \"") + kDataKeysRow + "\" is not usable: " + why);
  };
  const auto j = json::parse(row, nullptr, false);
  if (!j.is_object() || j.value("Format", "") != kFormat) return fail(std::string("not ") + kFormat);
  const auto active = j.find("Active");
  const auto entries = j.find("Keys");
  if (active == j.end() || !active->is_string() || entries == j.end() || !entries->is_array() || entries->empty())
    return fail("needs \"Active\" and a non-empty \"Keys\"");
  std::vector<Key> keys;
  std::string wrapped_by;
  for (const auto& e : *entries) {
    if (!e.is_object() || !e.contains("ID") || !e["ID"].is_string() || !e.contains("Wrapped") ||
        !e["Wrapped"].is_string())
      return fail("every key needs string fields \"ID\" and \"Wrapped\"");
    Key key;
    key.id = e["ID"].get<std::string>();
    if (key.id.empty() || key.id.find(':') != std::string::npos)
      return fail("data key id \"" + key.id + "\" is not valid");
    const auto wrapped = e["Wrapped"].get<std::string>();
    const auto root_id = sealed_key_id(wrapped);
    if (!roots.find(root_id))
      return domain::error("data key \"" + key.id + "\" of the state is wrapped with root key \"" + root_id +
                           "\", which keyring file " + roots.path().string() +
                           " does not hold: give this control plane a keyring file with root key \"" + root_id +
                           "\" (every member sharing the state needs it); nothing was changed");
    auto material = open_sealed(roots, wrapped, wrap_aad(key.id));
    if (!material) return fail("data key \"" + key.id + "\": " + material.error());
    if (material->size() != key.bytes.size()) return fail("data key \"" + key.id + "\" is not 32 bytes");
    std::memcpy(key.bytes.data(), material->data(), key.bytes.size());
    if (e.contains("Created") && e["Created"].is_string()) key.created = e["Created"].get<std::string>();
    wrapped_by = root_id;
    keys.push_back(std::move(key));
  }
  auto id = active->get<std::string>();
  bool found = false;
  for (const auto& k : keys) found = found || k.id == id;
  if (!found) return fail("the active data key \"" + id + "\" is not among its keys");
  return DataKeys{Keyring::of(std::move(keys), std::move(id), kWhere), std::move(wrapped_by)};
}

}  // namespace mooring::controlplane::secrets
