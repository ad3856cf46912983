// Secrets room: encryption at rest of the state's secrets. A StateBackend decorator between the
// store and SQLite: on the way down it seals each secret field of a row (a volume's `Secrets`,
// an allocation's `Task.SecretEnv`) with the keyring's active key; on the way up (load) it opens
// them, so the store, the API and the GC only ever see plain domain objects and shared/domain's
// storage codecs stay unaware of encryption. A sealed field is a string where the codec expects
// a map, so a row read without its keyring fails to decode instead of losing its secrets.
//
// load() also migrates: rows written before sealing existed (plain maps) are rewritten sealed,
// and the backend is scrubbed so the plain bytes leave the file. A row sealed with a key the
// keyring lacks, or whose seal does not open, fails the load naming the row and the keyring file.
//
// Rotation: rotate() adds a new active key (keyring written first, old keys kept), re-seals every
// row with it in one transaction, then drops the old keys from the keyring. A crash in between
// leaves old keys that are still valid, never a row no key opens.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/controlplane/secrets/keyring.hpp"
#include "services/controlplane/state/backend.hpp"

namespace mooring::controlplane::secrets {

// One storage row's secret fields sealed (text unchanged when it has none).
domain::Expected<std::string> seal_row(Table table, const std::string& key, const std::string& text, const Key& active);

struct OpenedRow {
  std::string text;            // with every secret field a plain map again
  bool had_plaintext = false;  // a non-empty secret field was stored plain (to migrate)
  std::vector<std::string> key_ids;  // keys its sealed fields name
};
// Errors name the table, row and field (never a value).
domain::Expected<OpenedRow> open_row(Table table, const std::string& key, const std::string& text,
                                     const Keyring& keyring);

struct Rotation {
  std::string key_id;                // the new active key
  std::size_t rows_resealed = 0;
  std::vector<std::string> retired;  // key ids dropped from the keyring
};

class SealedBackend final : public StateBackend {
 public:
  SealedBackend(StateBackend& inner, Keyring keyring);

  domain::Expected<Snapshot> load() override;
  domain::Status apply(const Transaction& tx) override;
  domain::Status apply_group(std::span<const Transaction> txs) override;
  domain::Status scrub() override;

  // See the top of this file. Serialised with writes; blocks for one pass over the state.
  domain::Expected<Rotation> rotate();

  std::string active_key_id() const;
  // "<key id>:<hex HMAC-SHA256 of data>" under a subkey of key `key_id` ("" = the active key);
  // nullopt when the keyring no longer holds that key. Idempotency-Key fingerprints use it, so
  // the state never holds a bare hash of a request body that carried secrets.
  std::optional<std::string> fingerprint(std::string_view key_id, std::string_view data) const;
  std::string keyring_path() const;

 private:
  domain::Expected<std::vector<Transaction>> sealed(std::span<const Transaction> txs) const;

  StateBackend& inner_;
  mutable std::mutex mutex_;  // writes come from the store's writer thread, rotate() from the executor
  Keyring keyring_;
};

}  // namespace mooring::controlplane::secrets
