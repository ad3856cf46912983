// PUT|POST /v1/operator/keyring/rotate -> {"KeyID","RowsResealed","RetiredKeys","Index"}: the
// secrets room re-seals every stored secret with a new key (secrets/keyring_rotation.hpp).
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/secrets/keyring_rotation.hpp"

namespace mooring::controlplane::api {

Answer rotate_keyring(Context& ctx, const http::Request&) {
  if (!ctx.sealed) co_return http::error_response(501, "keyring rotation: this control plane has no keyring");
  auto rotated = co_await secrets::rotate_keyring(*ctx.sealed, ctx.store);
  if (!rotated) co_return http::error_response(500, "keyring rotation failed: " + rotated.error());
  auto r = json_ok({{"KeyID", rotated->key_id},
                    {"RowsResealed", rotated->rows_resealed},
                    {"RetiredKeys", rotated->retired},
                    {"Index", rotated->index}});
  r.index = rotated->index;
  co_return r;
}

}  // namespace mooring::controlplane::api
