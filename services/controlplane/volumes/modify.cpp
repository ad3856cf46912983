// Modify (CSI 1.12 ControllerModifyVolume): change a volume's mutable parameters in place. The
// plugin's MODIFY_VOLUME first, then the rules (claims/volume_rules.hpp: declared keys only, no
// release under way), then one call through the volume's lock with its secrets, then the
// answer recorded on the volume (LastModify) whatever it was, so an uncertain one explains itself.
#include "services/controlplane/claims/volume_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

// What the answer leaves on the volume: applied, failed (nothing applied: CSI 1.12 says so of
// INVALID_ARGUMENT, and every final answer is read the same way) or uncertain (may be applied).
std::string_view modify_state(const agentclient::AgentResult<::csi::v1::ControllerModifyVolumeResponse>& res) {
  if (res.ok()) return domain::kModifyApplied;
  if (res.outcome == csi::Outcome::uncertain || res.uncertain_earlier) return domain::kModifyUncertain;
  return domain::kModifyFailed;
}

}  // namespace

asio::awaitable<Outcome<Written>> VolumeLifecycle::modify(std::string key, StringMap wanted, StringMap secrets) {
  const domain::Volume* cur = store_.volume(key);
  if (!cur) co_return missing_volume(key);
  const domain::Plugin* plugin = store_.plugin(cur->plugin_id);
  if (!plugin) co_return invalid("volume " + in_quotes(cur->id) + ": no CSI plugin named " + in_quotes(cur->plugin_id));
  if (auto no = unsupported(*plugin, &domain::ControllerInfo::supports_modify,
                            "volume " + in_quotes(cur->id) + ": plugin " + in_quotes(plugin->id) +
                                " has no controller that supports MODIFY_VOLUME; its parameters cannot change "
                                "without recreating the volume"))
    co_return *no;
  // The rules after the plugin's ability: on a plugin that cannot modify, no parameter is
  // mutable, and the reason to say is the plugin's.
  if (auto no = check_modify(*cur, wanted)) co_return from_refusal(*no);
  ::csi::v1::ControllerModifyVolumeRequest csi;
  csi.set_volume_id(cur->external_id);
  put_secrets(csi.mutable_secrets(), cur->secrets);
  put_secrets(csi.mutable_secrets(), secrets);  // the request's win, as for every other call
  for (const auto& [k, val] : wanted) (*csi.mutable_mutable_parameters())[k] = val;
  const std::string plugin_id = cur->plugin_id;
  auto res = co_await controller_.controller_modify_volume(plugin_id, key, std::move(csi));
  if (res.no_target) co_return plugin_failure(res);  // nothing was sent: nothing to record
  auto index = record_modify(key, wanted, modify_state(res), res.ok() ? std::string() : res.error);
  if (!index) co_return index.error();
  if (!res.ok()) co_return plugin_failure(res);
  co_return Written{*index, {*store_.volume(key)}};
}

Outcome<std::uint64_t> VolumeLifecycle::record_modify(const std::string& key, const StringMap& wanted,
                                                      std::string_view state, const std::string& error) {
  const domain::Volume* latest = store_.volume(key);
  const auto ref = domain::split_volume_key(key);
  const std::string id = ref ? ref->id : key;
  if (!latest) return conflict("volume " + in_quotes(id) + " was deregistered while it was modified");
  domain::Volume v = *latest;
  const bool applied = state == domain::kModifyApplied;
  if (applied)
    for (const auto& [k, val] : wanted) v.mutable_parameters[k] = val;
  v.last_modify = domain::VolumeModification{wanted, std::string(state), error, domain::now()};
  std::string message = "volume " + in_quotes(id) + ": mutable parameters modified";
  if (!applied) message = "volume " + in_quotes(id) + ": modify " + std::string(state) + ": " + error;
  Batch batch;
  batch.add_event({.topic = "Volume",
                   .type = applied ? "VolumeModified" : "VolumeModifyFailed",
                   .ns = v.ns,
                   .key = v.id,
                   .message = message,
                   .details = {{"plugin_id", v.plugin_id}, {"state", std::string(state)}}});
  batch.put(v);
  auto index = store_.commit(std::move(batch));
  if (!index) return write_failed("record the modify of volume " + in_quotes(id), index.error());
  log_.info("volume modify", {{"volume_id", id}, {"state", state}, {"keys", wanted.size()}});
  return *index;
}

}  // namespace mooring::controlplane::volumes
