#include "services/controlplane/secrets/sealed_backend.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>

#include "services/controlplane/secrets/sealer.hpp"
#include "shared/domain/text.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::secrets {
namespace {

using nlohmann::json;

const log::Logger& logger() {
  static const log::Logger l{"secrets"};
  return l;
}

// The secret fields of the state, one row each: a string map at `outer` (or `outer`.`inner`).
struct SecretField {
  Table table;
  const char* outer;
  const char* inner;  // nullptr: the map is `outer` itself
  const char* name;   // in errors and the associated data
};
constexpr std::array<SecretField, 2> kSecretFields{{
    {Table::volumes, "Secrets", nullptr, "Secrets"},
    {Table::allocations, "Task", "SecretEnv", "Task.SecretEnv"},
}};

bool has_secret_fields(Table t) {
  return std::any_of(kSecretFields.begin(), kSecretFields.end(), [&](const SecretField& f) { return f.table == t; });
}

// Cheap test on the row's text before parsing it: the field's key as the storage codec writes it
// (compact JSON), followed by a non-empty map or a sealed string. A value that merely contains
// these characters is escaped in JSON, so a miss here is a certain miss.
bool may_hold(const std::string& text, const SecretField& f, bool sealed_too) {
  const std::string key = std::string("\"") + (f.inner ? f.inner : f.outer) + "\":";
  return text.find(key + "{\"") != std::string::npos ||
         (sealed_too && text.find(key + "\"" + std::string(kSealedPrefix)) != std::string::npos);
}

json* field_in(json& row, const SecretField& f) {
  if (!row.is_object()) return nullptr;
  auto outer = row.find(f.outer);
  if (outer == row.end()) return nullptr;
  if (!f.inner) return &*outer;
  if (!outer->is_object()) return nullptr;
  auto inner = outer->find(f.inner);
  return inner == outer->end() ? nullptr : &*inner;
}

// Binds a sealed value to its place: table, row key and field.
std::string associated_data(Table t, const std::string& key, const SecretField& f) {
  return "mooring-state/v1|" + std::string(to_string(t)) + "|" + key + "|" + f.name;
}

std::string where(Table t, const std::string& key, const SecretField& f) {
  return "state: " + std::string(to_string(t)) + " row \"" + key + "\" field \"" + f.name + "\"";
}

}  // namespace

domain::Expected<std::string> seal_row(Table table, const std::string& key, const std::string& text, const Key& active) {
  std::optional<json> row;
  bool changed = false;
  for (const auto& f : kSecretFields) {
    if (f.table != table || !may_hold(text, f, false)) continue;
    if (!row) row = json::parse(text, nullptr, false);
    json* field = field_in(*row, f);
    if (!field || !field->is_object() || field->empty()) continue;
    auto sealed = seal(active, field->dump(), associated_data(table, key, f));
    if (!sealed) return domain::error(where(table, key, f) + ": " + sealed.error());
    *field = std::move(*sealed);
    changed = true;
  }
  return changed ? row->dump() : text;
}

domain::Expected<OpenedRow> open_row(Table table, const std::string& key, const std::string& text,
                                     const Keyring& keyring) {
  OpenedRow out;
  std::optional<json> row;
  for (const auto& f : kSecretFields) {
    if (f.table != table || !may_hold(text, f, true)) continue;
    if (!row) row = json::parse(text, nullptr, false);
    json* field = field_in(*row, f);
    if (!field) continue;
    if (field->is_object()) {
      out.had_plaintext = out.had_plaintext || !field->empty();
      continue;
    }
    if (!field->is_string()) continue;  // the codec reports the wrong type
    const auto sealed = field->get<std::string>();
    auto plain = open_sealed(keyring, sealed, associated_data(table, key, f));
    if (!plain) return domain::error(where(table, key, f) + ": " + plain.error());
    auto map = json::parse(*plain, nullptr, false);
    if (!map.is_object()) return domain::error(where(table, key, f) + ": sealed content is not a map");
    out.key_ids.push_back(sealed_key_id(sealed));
    *field = std::move(map);
  }
  out.text = out.key_ids.empty() ? text : row->dump();
  return out;
}

SealedBackend::SealedBackend(StateBackend& inner, Keyring keyring) : inner_(inner), keyring_(std::move(keyring)) {}

namespace {

// HMAC-SHA256 through OpenSSL; `out` holds 32 bytes.
void hmac_sha256(const unsigned char* key, std::size_t key_length, std::string_view data, unsigned char* out) {
  unsigned length = 0;
  if (!HMAC(EVP_sha256(), key, static_cast<int>(key_length), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), out, &length) ||
      length != 32)
    throw std::runtime_error("HMAC-SHA256 is not available from OpenSSL");
}

}  // namespace

std::optional<std::string> SealedBackend::fingerprint(std::string_view key_id, std::string_view data) const {
  std::lock_guard lock(mutex_);
  const Key* key = key_id.empty() ? &keyring_.active() : keyring_.find(std::string(key_id));
  if (!key) return std::nullopt;
  // A subkey for this one use, so the sealing key itself never keys an HMAC.
  unsigned char subkey[32], mac[32];
  hmac_sha256(key->bytes.data(), key->bytes.size(), "mooring/request-fingerprint/v1", subkey);
  hmac_sha256(subkey, sizeof subkey, data, mac);
  return key->id + ":" + domain::to_hex({reinterpret_cast<const char*>(mac), sizeof mac});
}

std::string SealedBackend::active_key_id() const {
  std::lock_guard lock(mutex_);
  return keyring_.active().id;
}

std::string SealedBackend::keyring_path() const {
  std::lock_guard lock(mutex_);
  return keyring_.path().string();
}

domain::Expected<Snapshot> SealedBackend::load() {
  std::lock_guard lock(mutex_);
  auto snap = inner_.load();
  if (!snap) return snap;
  Transaction migrate{.index = snap->index, .mutations = {}, .tables = {}};
  for (auto& [table, rows] : snap->rows) {
    if (!has_secret_fields(table)) continue;
    for (auto& [key, text] : rows) {
      auto opened = open_row(table, key, text, keyring_);
      if (!opened) {
        if (!keyring_.on_disk())
          return domain::error(opened.error() + ". The keyring file " + keyring_.path().string() +
                               " does not exist: restore the one this state was sealed with (or name it with "
                               "--keyring-file); nothing was changed");
        return domain::error(opened.error() + "; nothing was changed");
      }
      if (opened->had_plaintext) {
        auto resealed = seal_row(table, key, opened->text, keyring_.active());
        if (!resealed) return domain::error(resealed.error());
        migrate.mutations.push_back({table, key, std::move(*resealed)});
      }
      text = std::move(opened->text);
    }
  }
  // The key exists on disk before anything is sealed with it.
  if (!keyring_.on_disk()) {
    if (auto st = keyring_.save(); !st) return domain::error(st.error());
    logger().info("keyring created", {{"path", keyring_.path().string()}, {"key_id", keyring_.active().id}});
  }
  if (!migrate.mutations.empty()) {
    if (auto st = inner_.apply(migrate); !st) return domain::error("sealing plain-text secrets: " + st.error());
    if (auto st = inner_.scrub(); !st) return domain::error("sealing plain-text secrets: " + st.error());
    logger().info("plain-text secrets in the state sealed",
                  {{"rows", static_cast<std::int64_t>(migrate.mutations.size())}, {"key_id", keyring_.active().id}});
  }
  return snap;
}

domain::Expected<std::vector<Transaction>> SealedBackend::sealed(std::span<const Transaction> txs) const {
  std::vector<Transaction> out(txs.begin(), txs.end());
  for (auto& tx : out) {
    for (auto& m : tx.mutations) {
      if (!m.value || !has_secret_fields(m.table)) continue;
      auto s = seal_row(m.table, m.key, *m.value, keyring_.active());
      if (!s) return domain::error(s.error());
      *m.value = std::move(*s);
    }
  }
  return out;
}

domain::Status SealedBackend::apply(const Transaction& tx) { return apply_group({&tx, 1}); }

namespace {

// Most writes (claims, reports, events) carry no secret: they pass through without a copy.
bool any_secret(std::span<const Transaction> txs) {
  for (const auto& tx : txs)
    for (const auto& m : tx.mutations)
      if (m.value)
        for (const auto& f : kSecretFields)
          if (f.table == m.table && may_hold(*m.value, f, false)) return true;
  return false;
}

}  // namespace

domain::Status SealedBackend::apply_group(std::span<const Transaction> txs) {
  std::lock_guard lock(mutex_);
  if (!keyring_.on_disk()) return domain::error("keyring " + keyring_.path().string() + " is not written yet (load first)");
  if (!any_secret(txs)) return inner_.apply_group(txs);
  auto out = sealed(txs);
  if (!out) return domain::error(out.error());
  return out->size() == 1 ? inner_.apply(out->front()) : inner_.apply_group(*out);
}

domain::Status SealedBackend::scrub() {
  std::lock_guard lock(mutex_);
  return inner_.scrub();
}

domain::Expected<Rotation> SealedBackend::rotate() {
  std::lock_guard lock(mutex_);
  Keyring next = keyring_;
  auto id = next.add_active_key();
  if (!id) return domain::error(id.error());
  // 1. The new key is on disk (beside the old ones) before anything is sealed with it.
  if (auto st = next.save(); !st) return domain::error(st.error());
  keyring_ = next;
  // 2. Every sealed row re-sealed with it, in one transaction.
  auto snap = inner_.load();
  if (!snap) return domain::error("rotation: reading the state: " + snap.error());
  Transaction reseal{.index = snap->index, .mutations = {}, .tables = {}};
  for (const auto& [table, rows] : snap->rows) {
    if (!has_secret_fields(table)) continue;
    for (const auto& [key, text] : rows) {
      auto opened = open_row(table, key, text, keyring_);
      if (!opened) return domain::error("rotation: " + opened.error());
      if (opened->key_ids.empty() && !opened->had_plaintext) continue;
      auto resealed = seal_row(table, key, opened->text, keyring_.active());
      if (!resealed) return domain::error("rotation: " + resealed.error());
      reseal.mutations.push_back({table, key, std::move(*resealed)});
    }
  }
  if (!reseal.mutations.empty()) {
    if (auto st = inner_.apply(reseal); !st) return domain::error("rotation: writing the re-sealed rows: " + st.error());
  }
  if (auto st = inner_.scrub(); !st) return domain::error("rotation: " + st.error());
  // 3. Nothing on disk needs the old keys any more.
  Rotation out{.key_id = *id, .rows_resealed = reseal.mutations.size(), .retired = {}};
  next.retire_inactive_keys();
  if (auto st = next.save(); !st) return domain::error("rotation: rows re-sealed, but " + st.error());
  out.retired.clear();
  for (const auto& k : keyring_.keys())
    if (k.id != *id) out.retired.push_back(k.id);
  keyring_ = std::move(next);
  logger().info("keyring rotated", {{"key_id", out.key_id},
                                    {"rows", static_cast<std::int64_t>(out.rows_resealed)},
                                    {"keys_retired", static_cast<std::int64_t>(out.retired.size())}});
  return out;
}

}  // namespace mooring::controlplane::secrets
