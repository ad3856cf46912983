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

domain::Expected<std::string> seal_row(Table table, const std::string& key, const std::string& text,
                                       const Key& active) {
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

SealedBackend::SealedBackend(StateBackend& inner, Keyring roots) : inner_(inner), roots_(std::move(roots)) {}

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
  if (!data_) return std::nullopt;
  const Key* key = key_id.empty() ? &data_->keys.active() : data_->keys.find(std::string(key_id));
  if (!key) return std::nullopt;
  // A subkey for this one use, so the sealing key itself never keys an HMAC.
  unsigned char subkey[32], mac[32];
  hmac_sha256(key->bytes.data(), key->bytes.size(), "mooring/request-fingerprint/v1", subkey);
  hmac_sha256(subkey, sizeof subkey, data, mac);
  return key->id + ":" + domain::to_hex({reinterpret_cast<const char*>(mac), sizeof mac});
}

std::string SealedBackend::active_key_id() const {
  std::lock_guard lock(mutex_);
  return data_ ? data_->keys.active().id : std::string{};
}

std::string SealedBackend::root_key_id() const {
  std::lock_guard lock(mutex_);
  return data_ ? data_->wrapped_by : std::string{};
}

std::string SealedBackend::keyring_path() const {
  std::lock_guard lock(mutex_);
  return roots_.path().string();
}

namespace {

// Every sealed row of `snap`'s secret tables opened with `from` and sealed again with `to`,
// as mutations (rows without secrets are left alone).
domain::Expected<std::vector<Mutation>> reseal_all(const Snapshot& snap, const Keyring& from, const Key& to) {
  std::vector<Mutation> out;
  for (const auto& [table, rows] : snap.rows) {
    if (!has_secret_fields(table)) continue;
    for (const auto& [key, text] : rows) {
      auto opened = open_row(table, key, text, from);
      if (!opened) return domain::error(opened.error());
      if (opened->key_ids.empty() && !opened->had_plaintext) continue;
      auto resealed = seal_row(table, key, opened->text, to);
      if (!resealed) return domain::error(resealed.error());
      out.push_back({table, key, std::move(*resealed)});
    }
  }
  return out;
}

}  // namespace

std::string SealedBackend::missing_file_hint() const {
  if (roots_.on_disk()) return {};
  return ". The keyring file " + roots_.path().string() +
         " does not exist: restore the one this state was sealed with (or name it with --keyring-file); nothing was "
         "changed";
}

domain::Expected<Snapshot> SealedBackend::load() {
  std::lock_guard lock(mutex_);
  // The file again: root keys added since the start (a Secret updated in place), or a file
  // another member created since this one started, count.
  {
    auto fresh = Keyring::load_or_new(roots_.path());
    if (!fresh) return domain::error(fresh.error() + "; nothing was changed");
    if (fresh->on_disk())
      roots_ = std::move(*fresh);
    else if (roots_.on_disk())
      return domain::error("keyring file " + roots_.path().string() + " has disappeared; nothing was changed");
  }
  auto snap = inner_.load();
  if (!snap) return snap;
  std::optional<DataKeys> data;
  if (auto kt = snap->rows.find(Table::keyring); kt != snap->rows.end()) {
    if (auto row = kt->second.find(kDataKeysRow); row != kt->second.end()) {
      auto unwrapped = unwrap_data_keys(row->second, roots_);
      if (!unwrapped) return domain::error(unwrapped.error() + missing_file_hint());
      data = std::move(*unwrapped);
    }
    snap->rows.erase(kt);
  }
  snap->table_index.erase(Table::keyring);
  // No data keys yet: a new state, or one sealed directly with the file's keys (before envelope
  // keys), whose rows the file's keys open.
  const bool migrating = !data;
  if (migrating) {
    auto fresh = new_data_keys(roots_.active().id);
    if (!fresh) return domain::error(fresh.error());
    data = std::move(*fresh);
  }
  const Keyring& opener = migrating ? roots_ : data->keys;
  Transaction migrate{.index = snap->index + 1, .mutations = {}, .tables = {}};
  std::size_t rows = 0;
  for (auto& [table, table_rows] : snap->rows) {
    if (!has_secret_fields(table)) continue;
    for (auto& [key, text] : table_rows) {
      auto opened = open_row(table, key, text, opener);
      if (!opened)
        return domain::error(opened.error() + (roots_.on_disk() ? "; nothing was changed" : missing_file_hint()));
      if (opened->had_plaintext || (migrating && !opened->key_ids.empty())) {
        auto resealed = seal_row(table, key, opened->text, data->keys.active());
        if (!resealed) return domain::error(resealed.error());
        migrate.mutations.push_back({table, key, std::move(*resealed)});
        ++rows;
      }
      text = std::move(opened->text);
    }
  }
  // The root key exists on disk before anything is wrapped with it.
  if (!roots_.on_disk()) {
    if (auto st = roots_.save(); !st) return domain::error(st.error());
    logger().info("keyring created", {{"path", roots_.path().string()}, {"root_key_id", roots_.active().id}});
  }
  if (migrating) {
    auto row = wrap_data_keys(data->keys, roots_.active());
    if (!row) return domain::error(row.error());
    migrate.mutations.insert(migrate.mutations.begin(), Mutation{Table::keyring, kDataKeysRow, std::move(*row)});
  }
  if (!migrate.mutations.empty()) {
    // One transaction: the data key and every row re-sealed with it, or (crash) none of it.
    if (auto st = inner_.apply(migrate); !st) return domain::error("sealing the state with a data key: " + st.error());
    if (auto st = inner_.scrub(); !st) return domain::error("sealing the state with a data key: " + st.error());
    snap->index = migrate.index;
    logger().info("state sealed with a data key", {{"rows", static_cast<std::int64_t>(rows)},
                                                   {"key_id", data->keys.active().id},
                                                   {"root_key_id", data->wrapped_by}});
  }
  data_ = std::move(data);
  return snap;
}

namespace {

// The transactions with their secret fields sealed with `active`.
domain::Expected<std::vector<Transaction>> sealed(std::span<const Transaction> txs, const Key& active) {
  std::vector<Transaction> out(txs.begin(), txs.end());
  for (auto& tx : out) {
    for (auto& m : tx.mutations) {
      if (!m.value || !has_secret_fields(m.table)) continue;
      auto s = seal_row(m.table, m.key, *m.value, active);
      if (!s) return domain::error(s.error());
      *m.value = std::move(*s);
    }
  }
  return out;
}

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

domain::Status SealedBackend::apply(const Transaction& tx) { return apply_group({&tx, 1}); }

domain::Status SealedBackend::apply_group(std::span<const Transaction> txs) {
  std::lock_guard lock(mutex_);
  if (!data_) return domain::error("the state's data keys are not loaded yet (load first)");
  if (pending_ && !txs.empty()) return apply_rotation(txs);
  if (!any_secret(txs)) return inner_.apply_group(txs);
  auto out = sealed(txs, data_->keys.active());
  if (!out) return domain::error(out.error());
  return out->size() == 1 ? inner_.apply(out->front()) : inner_.apply_group(*out);
}

domain::Status SealedBackend::apply_rotation(std::span<const Transaction> txs) {
  Rotation plan = std::move(*pending_);
  pending_.reset();
  auto fail = [&](const std::string& why) {
    return domain::error("keyring rotation: " + why + "; nothing was changed");
  };
  // The new data keys (data rotation) or the same ones under the new root key (root rotation).
  DataKeys next = *data_;
  const Key* root = roots_.find(plan.root_key_id);
  if (!root)
    return fail("root key \"" + plan.root_key_id + "\" is no longer in keyring file " + roots_.path().string());
  std::vector<Mutation> ahead;
  if (!plan.root) {
    auto fresh = new_data_keys(plan.root_key_id, plan.key_id);  // the id prepare_rotation() promised
    if (!fresh) return fail(fresh.error());
    next = std::move(*fresh);
    // The rows as durable now, before this group, re-sealed; the group's own writes follow.
    auto snap = inner_.load();
    if (!snap) return fail("reading the state: " + snap.error());
    auto rows = reseal_all(*snap, data_->keys, next.keys.active());
    if (!rows) return fail(rows.error());
    ahead = std::move(*rows);
  } else {
    next.wrapped_by = plan.root_key_id;
  }
  auto row = wrap_data_keys(next.keys, *root);
  if (!row) return fail(row.error());
  ahead.insert(ahead.begin(), Mutation{Table::keyring, kDataKeysRow, std::move(*row)});
  plan.rows_resealed = ahead.size() - 1;

  auto out = sealed(txs, next.keys.active());
  if (!out) return fail(out.error());
  auto& first = out->front().mutations;
  first.insert(first.begin(), std::make_move_iterator(ahead.begin()), std::make_move_iterator(ahead.end()));
  auto st = out->size() == 1 ? inner_.apply(out->front()) : inner_.apply_group(*out);
  // On failure the old keys stay; an unknown outcome is settled by the store's reload (load()
  // reads the data keys back from the state).
  if (!st) return st;
  data_ = std::move(next);
  if (auto sc = inner_.scrub(); !sc)
    logger().warn("keyring rotated, but the old bytes may linger until the next checkpoint", {{"error", sc.error()}});
  logger().info("keyring rotated", {{"kind", plan.root ? "root" : "data"},
                                    {"key_id", plan.key_id},
                                    {"root_key_id", plan.root_key_id},
                                    {"rows", static_cast<std::int64_t>(plan.rows_resealed)}});
  finished_ = std::move(plan);
  return {};
}

domain::Expected<Rotation> SealedBackend::prepare_rotation(bool root) {
  std::lock_guard lock(mutex_);
  if (!data_) return domain::error("the state is not loaded here");
  if (pending_ || finished_) return domain::error("another keyring rotation is in progress");
  Rotation plan;
  plan.root = root;
  if (!root) {
    auto id = make_key();  // only its id: the key itself is made when written
    if (!id) return domain::error(id.error());
    plan.key_id = id->id;
    plan.root_key_id = data_->wrapped_by;
    for (const auto& k : data_->keys.keys()) plan.retired.push_back(k.id);
  } else {
    // The operator added the new root key to every member's file and made it "Active" there.
    auto fresh = Keyring::load_or_new(roots_.path());
    if (!fresh) return domain::error(fresh.error());
    if (!fresh->on_disk()) return domain::error("keyring file " + roots_.path().string() + " has disappeared");
    if (fresh->active().id == data_->wrapped_by)
      return domain::error("the active root key \"" + data_->wrapped_by + "\" of keyring file " +
                           roots_.path().string() +
                           " already wraps the data keys: add a new root key to every control plane's keyring file, "
                           "make it \"Active\" there, then rotate the root key");
    roots_ = std::move(*fresh);
    plan.key_id = data_->keys.active().id;
    plan.root_key_id = roots_.active().id;
    plan.retired.push_back(data_->wrapped_by);
  }
  pending_ = plan;
  return plan;
}

std::optional<Rotation> SealedBackend::finished_rotation() {
  std::lock_guard lock(mutex_);
  auto out = std::move(finished_);
  finished_.reset();
  return out;
}

void SealedBackend::cancel_rotation() {
  std::lock_guard lock(mutex_);
  pending_.reset();
  finished_.reset();
}

domain::Status SealedBackend::scrub() {
  std::lock_guard lock(mutex_);
  return inner_.scrub();
}

}  // namespace mooring::controlplane::secrets
