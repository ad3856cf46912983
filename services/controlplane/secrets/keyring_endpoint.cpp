#include "services/controlplane/secrets/keyring_endpoint.hpp"

#include <nlohmann/json.hpp>

#include "services/controlplane/api/api.hpp"
#include "services/controlplane/secrets/sealed_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::secrets {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

asio::awaitable<http::Response> rotate(SealedBackend& sealed, StateStore& store) {
  // Everything committed so far reaches the disk first, so the pass below sees it.
  const auto before = store.index();
  if (auto st = co_await store.durable(before); !st)
    co_return http::error_response(500, "keyring rotation: the state is not durable: " + st.error());
  auto rotation = sealed.rotate();
  if (!rotation) {
    log::Logger("secrets").error("keyring rotation failed", {{"error", rotation.error()}});
    co_return http::error_response(500, "keyring rotation failed: " + rotation.error());
  }
  Batch batch;
  std::string retired;
  for (const auto& id : rotation->retired) retired += (retired.empty() ? "" : ",") + id;
  batch.add_event(domain::Event{.index = 0,
                                .time = {},
                                .topic = "Keyring",
                                .type = "KeyringRotated",
                                .key = rotation->key_id,
                                .message = "secrets re-sealed with a new key",
                                .details = {{"key_id", rotation->key_id},
                                            {"rows_resealed", std::to_string(rotation->rows_resealed)},
                                            {"retired_keys", retired}}});
  auto index = store.commit(std::move(batch));
  if (!index) co_return http::error_response(500, "keyring rotated, but recording its event failed: " + index.error());
  if (auto st = co_await store.durable(*index); !st)
    co_return http::error_response(500, "keyring rotated, but recording its event failed: " + st.error());
  json body = {{"KeyID", rotation->key_id},
               {"RowsResealed", rotation->rows_resealed},
               {"RetiredKeys", rotation->retired},
               {"Index", *index}};
  auto r = http::json_response(body.dump());
  r.index = *index;
  co_return r;
}

}  // namespace

void add_keyring_routes(api::Api& api, SealedBackend& sealed, StateStore& store) {
  for (const char* method : {"PUT", "POST"})
    api.add_async_route(method, "/v1/operator/keyring/rotate",
                        [&sealed, &store](const http::Request&) { return rotate(sealed, store); });
}

}  // namespace mooring::controlplane::secrets
