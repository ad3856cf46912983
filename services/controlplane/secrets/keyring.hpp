// Secrets room: a set of AES-256 keys, one of them active. Two uses (envelope encryption, see
// data_keys.hpp):
// - the keyring FILE (`<data-dir>/keyring` or --keyring-file, 0600, written atomically, may be
//   read-only) holds the ROOT keys, which only wrap the data keys; every control plane sharing
//   a state needs the root key that wraps it:
//     {"Format":"mooring-keyring/1","Active":"<id>",
//      "Keys":[{"ID":"<id>","Key":"<base64 of 32 random bytes>","Created":"<RFC 3339>"}]}
//   "Active" names the root key that `keyring rotate -root` wraps the data keys with.
// - the DATA keys, which seal the rows' secrets, live wrapped in the state itself (Keyring::of).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "shared/domain/result.hpp"

namespace mooring::controlplane::secrets {

struct Key {
  std::string id;                        // 16 hex digits, random
  std::array<std::uint8_t, 32> bytes{};  // AES-256
  std::string created;                   // RFC 3339
};

// A new random key (random 16-hex-digit id, 32 bytes from OpenSSL's CSPRNG).
domain::Expected<Key> make_key();

class Keyring {
 public:
  // Reads the keyring at `path`. When the file does not exist, a new keyring with one random key
  // (not written yet: on_disk() is false until save()). Any other problem (unreadable, not a
  // keyring, a bad key) is an error naming the file.
  static domain::Expected<Keyring> load_or_new(const std::filesystem::path& path);
  // The file's content (`path` names it in errors).
  static domain::Expected<Keyring> parse(const std::string& text, const std::filesystem::path& path);
  // Keys held in memory (the state's data keys); `where` names them in errors. `active` must be
  // among `keys`.
  static Keyring of(std::vector<Key> keys, std::string active, std::filesystem::path where);

  const std::filesystem::path& path() const { return path_; }
  bool on_disk() const { return on_disk_; }
  const Key& active() const;
  const Key* find(const std::string& id) const;
  const std::vector<Key>& keys() const { return keys_; }

  // Writes the file atomically (0600) and fsyncs it.
  domain::Status save();
  // A new random key becomes the active one; the others stay (call save()).
  domain::Expected<std::string> add_active_key();
  // Drops every key but the active one; returns the ids dropped (call save()).
  std::vector<std::string> retire_inactive_keys();

  std::string to_text() const;

 private:
  std::filesystem::path path_;
  std::vector<Key> keys_;
  std::string active_;
  bool on_disk_ = false;
};

}  // namespace mooring::controlplane::secrets
