#include "services/controlplane/secrets/keyring_rotation.hpp"

#include "services/controlplane/secrets/sealed_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::secrets {

boost::asio::awaitable<domain::Expected<KeyringRotated>> rotate_keyring(SealedBackend& sealed, StateStore& store) {
  // Everything committed so far reaches the disk first, so the pass below sees it.
  if (auto st = co_await store.durable(store.index()); !st)
    co_return domain::error("the state is not durable: " + st.error());
  auto rotation = sealed.rotate();
  if (!rotation) {
    log::Logger("secrets").error("keyring rotation failed", {{"error", rotation.error()}});
    co_return domain::error(rotation.error());
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
  if (!index) co_return domain::error("rotated, but recording its event failed: " + index.error());
  if (auto st = co_await store.durable(*index); !st)
    co_return domain::error("rotated, but recording its event failed: " + st.error());
  co_return KeyringRotated{rotation->key_id, rotation->rows_resealed, rotation->retired, *index};
}

}  // namespace mooring::controlplane::secrets
