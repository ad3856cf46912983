// Secrets room: the operator's REST endpoint for the keyring, added at wiring time:
//   PUT|POST /v1/operator/keyring/rotate -> {"KeyID","RowsResealed","RetiredKeys","Index"}
// (see SealedBackend::rotate). An event "KeyringRotated" records it, with key ids only.
#pragma once

namespace mooring::controlplane {
class StateStore;
namespace api {
class Api;
}
}  // namespace mooring::controlplane

namespace mooring::controlplane::secrets {

class SealedBackend;

void add_keyring_routes(api::Api& api, SealedBackend& sealed, StateStore& store);

}  // namespace mooring::controlplane::secrets
