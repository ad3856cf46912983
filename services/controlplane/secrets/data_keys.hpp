// Secrets room: envelope keys. The rows' secrets are sealed with DATA keys that live in the state
// itself (table `keyring`, one row), each wrapped — sealed with AES-256-GCM, bound to its own id —
// by a ROOT key from the keyring file. Every control plane that loads the state and holds that
// root key can unseal it, so a rotation of the data keys is one state transaction and needs no
// file written (the file may be a read-only Kubernetes Secret). The row:
//   {"Format":"mooring-data-keys/1","Active":"<data key id>",
//    "Keys":[{"ID":"<id>","Created":"<RFC 3339>","Wrapped":"mooring-sealed:v1:<root id>:..."}]}
// All data keys are wrapped by the same root key (wrapping_root_id()).
#pragma once

#include <string>

#include "services/controlplane/secrets/keyring.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane::secrets {

// The row's key in table `keyring`.
inline constexpr const char* kDataKeysRow = "data-keys";

struct DataKeys {
  Keyring keys;            // in memory, named "the state's data keys" in errors
  std::string wrapped_by;  // the root key id wrapping every one of them
};

// A new set of one data key (the active one), wrapped by `root_id`; `id` names it ("" = random).
domain::Expected<DataKeys> new_data_keys(const std::string& root_id, const std::string& id = "");
// The row text: every data key wrapped with `root`.
domain::Expected<std::string> wrap_data_keys(const Keyring& data_keys, const Key& root);
// Unwraps the row with the root keys of `roots`. A root key the file lacks is an error naming
// the key id and the file (and what to do); no key material in any error.
domain::Expected<DataKeys> unwrap_data_keys(const std::string& row, const Keyring& roots);

}  // namespace mooring::controlplane::secrets
