// Secrets room: encryption at rest of the state's secrets. A StateBackend decorator between the
// store and the backend (SQLite or etcd): on the way down it seals each secret field of a row (a
// volume's `Secrets`, an allocation's `Task.SecretEnv`) with the active DATA key; on the way up
// (load) it opens them, so the store, the API and the GC only ever see plain domain objects and
// shared/domain's storage codecs stay unaware of encryption. A sealed field is a string where the
// codec expects a map, so a row read without its key fails to decode instead of losing secrets.
//
// Envelope keys (data_keys.hpp): the data keys live in the state (table `keyring`, hidden from
// the store), wrapped by a ROOT key of the keyring file. load() re-reads the file (a standby
// promoted later sees root keys added since it started) and unwraps the data keys; a file that
// lacks the wrapping root key fails the load naming the key id and the file, changing nothing.
//
// load() also migrates, in one transaction: a state without data keys (sealed directly with the
// file's keys before envelope keys existed, or plain maps from before sealing) gets a new data
// key, wrapped by the file's active root key, and every secret row re-sealed with it; the
// backend is then scrubbed so the old bytes leave the file. A crash before that commit leaves
// the old state, which the next start migrates again.
//
// Rotation rides on a write (keyring_rotation.hpp): prepare_rotation() plans it, and the next
// transaction the store writes carries, ahead of its own mutations, the new data-key row and
// every secret row re-sealed (data rotation: a new data key, the old ones dropped), or the
// data-key row re-wrapped with the file's active root key (root rotation). One transaction, so
// a crash leaves either the old keys and rows or the new ones; the keyring file is never written
// after the first start.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/controlplane/secrets/data_keys.hpp"
#include "services/controlplane/secrets/keyring.hpp"
#include "services/controlplane/state/backend.hpp"

namespace mooring::controlplane::secrets {

// One storage row's secret fields sealed (text unchanged when it has none).
domain::Expected<std::string> seal_row(Table table, const std::string& key, const std::string& text, const Key& active);

struct OpenedRow {
  std::string text;                  // with every secret field a plain map again
  bool had_plaintext = false;        // a non-empty secret field was stored plain (to migrate)
  std::vector<std::string> key_ids;  // keys its sealed fields name
};
// Errors name the table, row and field (never a value).
domain::Expected<OpenedRow> open_row(Table table, const std::string& key, const std::string& text,
                                     const Keyring& keyring);

struct Rotation {
  bool root = false;                 // re-wrap the data keys with the file's active root key
  std::string key_id;                // the active data key after it
  std::string root_key_id;           // the root key wrapping the data keys after it
  std::size_t rows_resealed = 0;     // known once written
  std::vector<std::string> retired;  // data keys dropped, or (root) the root key no longer used
};

class SealedBackend final : public StateBackend {
 public:
  // `roots`: the keyring file (Keyring::load_or_new); written by the first load() when new.
  SealedBackend(StateBackend& inner, Keyring roots);

  domain::Expected<Snapshot> load() override;
  domain::Status apply(const Transaction& tx) override;
  domain::Status apply_group(std::span<const Transaction> txs) override;
  domain::Status scrub() override;

  // See the top of this file. The plan (ids known before the write); one at a time, until
  // finished_rotation() or cancel_rotation(). Errors when nothing is loaded yet, or (root) when
  // the file's active root key already wraps the data keys.
  domain::Expected<Rotation> prepare_rotation(bool root);
  // The rotation written with the last write (nullopt: not yet, or it failed); clears it.
  std::optional<Rotation> finished_rotation();
  void cancel_rotation();

  std::string active_key_id() const;  // the active data key ("" before load)
  std::string root_key_id() const;    // the root key wrapping the data keys ("" before load)
  // "<key id>:<hex HMAC-SHA256 of data>" under a subkey of key `key_id` ("" = the active key);
  // nullopt when the keyring no longer holds that key. Idempotency-Key fingerprints use it, so
  // the state never holds a bare hash of a request body that carried secrets.
  std::optional<std::string> fingerprint(std::string_view key_id, std::string_view data) const;
  std::string keyring_path() const;

 private:
  domain::Status apply_rotation(std::span<const Transaction> txs);
  std::string missing_file_hint() const;  // "" when the keyring file exists

  StateBackend& inner_;
  mutable std::mutex mutex_;  // writes come from the store's writer thread, rotations from the executor
  Keyring roots_;
  std::optional<DataKeys> data_;     // set by load()
  std::optional<Rotation> pending_;  // rides on the next write
  std::optional<Rotation> finished_;
};

}  // namespace mooring::controlplane::secrets
