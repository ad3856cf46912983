// PUT|POST /v1/operator/keyring/rotate[?root=true] -> {"KeyID","RootKeyID","RowsResealed",
// "RetiredKeys","Index"}: the secrets room re-seals every stored secret with a new data key, or
// (root) re-wraps the data keys with the keyring file's active root key
// (secrets/keyring_rotation.hpp).
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/secrets/keyring_rotation.hpp"

namespace mooring::controlplane::api {

Answer rotate_keyring(Context& ctx, const http::Request& req) {
  if (!ctx.sealed) co_return http::error_response(501, "keyring rotation: this control plane has no keyring");
  bool root = false;
  if (auto it = req.query.find("root"); it != req.query.end()) {
    if (it->second != "true" && it->second != "false")
      co_return http::error_response(400, "keyring rotation: query parameter \"root\" must be true or false");
    root = it->second == "true";
  }
  bool conflict = false;
  auto rotated = co_await secrets::rotate_keyring(*ctx.sealed, ctx.store, root, &conflict);
  if (conflict) co_return http::error_response(409, "keyring rotation failed: " + rotated.error());
  if (!rotated) {
    // The store refused the write (a degraded leader, a resume, a broken store) or lost it: the
    // keys are the old ones; 503 with Retry-After as every other write in that state, not a 500.
    auto r = http::error_response(503, "keyring rotation failed, the keys are unchanged: " + rotated.error());
    r.set_header("Retry-After", "1");
    co_return r;
  }
  auto r = json_ok({{"KeyID", rotated->key_id},
                    {"RootKeyID", rotated->root_key_id},
                    {"Root", rotated->root},
                    {"RowsResealed", rotated->rows_resealed},
                    {"RetiredKeys", rotated->retired},
                    {"Index", rotated->index}});
  r.index = rotated->index;
  co_return r;
}

}  // namespace mooring::controlplane::api
