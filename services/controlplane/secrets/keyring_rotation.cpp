#include "services/controlplane/secrets/keyring_rotation.hpp"

#include "services/controlplane/secrets/sealed_backend.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/log/log.hpp"

namespace mooring::controlplane::secrets {

boost::asio::awaitable<domain::Expected<KeyringRotated>> rotate_keyring(SealedBackend& sealed, StateStore& store,
                                                                        bool root, bool* conflict) {
  auto plan = sealed.prepare_rotation(root);
  if (!plan) {
    if (conflict) *conflict = true;
    co_return domain::error(plan.error());
  }
  std::string retired;
  for (const auto& id : plan->retired) retired += (retired.empty() ? "" : ",") + id;
  Batch batch;
  batch.add_event(domain::Event{
      .index = 0,
      .time = {},
      .topic = "Keyring",
      .type = root ? "KeyringRootRotated" : "KeyringRotated",
      .key = root ? plan->root_key_id : plan->key_id,
      .message = root ? "data keys re-wrapped with a new root key" : "secrets re-sealed with a new data key",
      .details = {{"key_id", plan->key_id}, {"root_key_id", plan->root_key_id}, {"retired_keys", retired}}});
  // The rotation is written with this commit (or with the group it joins).
  auto index = store.commit(std::move(batch));
  if (!index) {
    sealed.cancel_rotation();
    co_return domain::error(index.error());
  }
  auto st = co_await store.durable(*index);
  auto done = sealed.finished_rotation();
  if (!st || !done) {
    sealed.cancel_rotation();
    const std::string why = st ? "the rotation was not written" : st.error();
    log::Logger("secrets").error("keyring rotation failed", {{"error", why}});
    co_return domain::error(why);
  }
  co_return KeyringRotated{done->root, done->key_id, done->root_key_id, done->rows_resealed, done->retired, *index};
}

}  // namespace mooring::controlplane::secrets
