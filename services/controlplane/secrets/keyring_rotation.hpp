// Secrets room: rotating the keyring as one operation on the running control plane: everything
// committed reaches the disk, every sealed row is re-sealed with a new key (SealedBackend::rotate),
// and a "KeyringRotated" event records it with key ids only.
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
  std::string key_id;
  std::uint64_t rows_resealed = 0;
  std::vector<std::string> retired;
  std::uint64_t index = 0;  // of the event
};

boost::asio::awaitable<domain::Expected<KeyringRotated>> rotate_keyring(SealedBackend& sealed, StateStore& store);

}  // namespace mooring::controlplane::secrets
