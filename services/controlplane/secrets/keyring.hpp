// Secrets room: the control plane's keyring — the AES-256 keys that seal CSI secrets and
// Task.SecretEnv in the state. One JSON file (`<data-dir>/keyring` or --keyring-file), 0600,
// written atomically:
//   {"Format":"mooring-keyring/1","Active":"<id>",
//    "Keys":[{"ID":"<id>","Key":"<base64 of 32 random bytes>","Created":"<RFC 3339>"}]}
// New seals use the active key; the others only open what they sealed (kept until a rotation
// has re-sealed every row, see sealed_backend.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "shared/domain/result.hpp"

namespace mooring::controlplane::secrets {

struct Key {
  std::string id;                       // 16 hex digits, random
  std::array<std::uint8_t, 32> bytes{};  // AES-256
  std::string created;                  // RFC 3339
};

class Keyring {
 public:
  // Reads the keyring at `path`. When the file does not exist, a new keyring with one random key
  // (not written yet: on_disk() is false until save()). Any other problem (unreadable, not a
  // keyring, a bad key) is an error naming the file.
  static domain::Expected<Keyring> load_or_new(const std::filesystem::path& path);
  // The file's content (`path` names it in errors).
  static domain::Expected<Keyring> parse(const std::string& text, const std::filesystem::path& path);

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
