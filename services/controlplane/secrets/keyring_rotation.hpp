// Secrets room: rotating the keys as one operation on the running control plane (the leader).
// The rotation rides on the commit of its own "KeyringRotated" event (SealedBackend::
// prepare_rotation): one state transaction carries the event, the new data-key row and every
// secret row re-sealed, so every member that loads the state afterwards reads it with the root
// key it already holds. The event names key ids only.
// - data rotation: a new data key seals every row; the old data keys are dropped.
// - root rotation (`root`): the data keys are re-wrapped with the keyring file's active root key
//   (added beforehand to every member's file); the old root key may be removed from the files
//   once this returned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "shared/domain/result.hpp"

namespace mooring::controlplane {
class StateStore;
}

namespace mooring::controlplane::secrets {

class SealedBackend;

struct KeyringRotated {
  bool root = false;
  std::string key_id;       // the active data key
  std::string root_key_id;  // the root key wrapping the data keys
  std::uint64_t rows_resealed = 0;
  std::vector<std::string> retired;  // data keys dropped, or (root) the root key no longer used
  std::uint64_t index = 0;           // of the event
};

// `*conflict` (when given) is set when the rotation could not start (another one runs, nothing
// loaded, the file's root key already wraps the data keys); otherwise an error is a write the
// store refused (read-only on a degraded leader) or lost (its flush failed): the old keys stay in
// memory; a flush whose outcome is in doubt may still commit, and the reload then brings its keys.
boost::asio::awaitable<domain::Expected<KeyringRotated>> rotate_keyring(SealedBackend& sealed, StateStore& store,
                                                                        bool root, bool* conflict = nullptr);

}  // namespace mooring::controlplane::secrets
