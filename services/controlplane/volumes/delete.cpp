// Delete through a controller. The volume is marked Deleting (durably) before DeleteVolume is
// sent, so no claim is taken while the storage may be going away; an answer that leaves the
// outcome unknown keeps the mark and the delete is retried in the background, across restarts.
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

::csi::v1::DeleteVolumeRequest delete_request(const domain::Volume& v, const StringMap& extra) {
  ::csi::v1::DeleteVolumeRequest csi;
  csi.set_volume_id(v.external_id);
  StringMap secrets = v.secrets;
  for (const auto& [k, val] : extra) secrets[k] = val;
  put_secrets(csi.mutable_secrets(), secrets);
  return csi;
}

std::string claim_holders(const domain::Volume& v) {
  std::string holders;
  for (const auto& [alloc, c] : v.claims)
    holders += (holders.empty() ? "" : ", ") + in_quotes(alloc) + " (" + std::string(domain::to_string(c.state)) + ")";
  return holders;
}

}  // namespace

std::optional<Failure> VolumeLifecycle::check_delete(const std::string& id) const {
  const domain::Volume* v = store_.volume(id);
  if (!v) return missing_volume(id);
  if (!v->claims.empty())
    return conflict("volume " + in_quotes(id) + " is in use by allocations " + claim_holders(*v) +
                    "; it cannot be deleted until every claim is released");
  const domain::Plugin* plugin = store_.plugin(v->plugin_id);
  if (!plugin)
    return Failure{Failure::Kind::unavailable, "cannot delete volume " + in_quotes(id) + ": its plugin " +
                                                   in_quotes(v->plugin_id) +
                                                   " is not registered (no controller to delete it with)"};
  if (!plugin->controllers.empty())
    if (auto no = unsupported(*plugin, &domain::ControllerInfo::supports_create_delete,
                              "volume " + in_quotes(id) + ": plugin " + in_quotes(v->plugin_id) +
                                  " does not support CREATE_DELETE_VOLUME; deregister it with DELETE /v1/volume/csi/" +
                                  v->id + (v->ns == domain::kDefaultNamespace ? "" : "?namespace=" + v->ns)))
      return no;
  return std::nullopt;
}

asio::awaitable<Outcome<std::uint64_t>> VolumeLifecycle::remove(std::string id, StringMap extra) {
  if (auto refused = check_delete(id)) co_return *refused;
  const domain::Volume& v = *store_.volume(id);
  const std::string plugin_id = v.plugin_id;
  auto csi = delete_request(v, extra);
  // Marked before anything is sent (the router waits for the mark to be durable): from here on
  // no claim is taken, so the storage is never deleted under an allocation that just claimed it.
  const bool earlier = v.deleting;  // an earlier delete's outcome is unknown: this one retries it
  if (!earlier) {
    if (auto marked = mark_deleting(id, true, {}); !marked)
      co_return write_failed("mark volume " + in_quotes(id) + " as being deleted", marked.error());
  }
  auto res = co_await controller_.delete_volume(plugin_id, id, csi);
  if (res.done()) {
    auto index = deregister_deleted(id, plugin_id);
    if (!index) co_return write_failed("deregister deleted volume " + in_quotes(id), index.error());
    co_return *index;
  }
  // The plugin said no, or nothing reached a plugin and no earlier attempt may have: the volume
  // is as it was.
  if (not_deleted(res) || (res.no_target && !earlier)) {
    (void)mark_deleting(id, false, res.error);
    co_return plugin_failure(res);
  }
  // The plugin may have deleted it: the mark stays and the delete is finished in the background.
  finish_delete_later(plugin_id, id, csi);
  co_return plugin_failure(res, res.error + "; volume " + in_quotes(id) +
                                    " stays marked as being deleted (no new claims) and the delete is retried in "
                                    "the background until the plugin answers");
}

domain::Expected<std::uint64_t> VolumeLifecycle::mark_deleting(const std::string& id, bool deleting,
                                                               const std::string& refused_because) {
  const domain::Volume* v = store_.volume(id);
  if (!v) return domain::error("volume " + in_quotes(id) + " is no longer registered");
  if (v->deleting == deleting) return store_.index();
  domain::Volume copy = *v;
  copy.deleting = deleting;
  Batch batch;
  if (!deleting)
    batch.add_event({.topic = "Volume",
                     .type = "VolumeDeleteRefused",
                     .ns = v->ns,
                     .key = v->id,
                     .message = "volume " + in_quotes(id) + " was not deleted; it takes claims again",
                     .details = {{"plugin_id", v->plugin_id}, {"error", refused_because}}});
  batch.put(std::move(copy));
  return store_.commit(std::move(batch));
}

domain::Expected<std::uint64_t> VolumeLifecycle::deregister_deleted(const std::string& id,
                                                                    const std::string& plugin_id) {
  const domain::Volume* v = store_.volume(id);
  if (!v) return store_.index();  // a concurrent delete (or a deregistration) got there first
  Batch batch;
  batch.add_event({.topic = "Volume",
                   .type = "VolumeDeleted",
                   .ns = v->ns,
                   .key = v->id,
                   .message = "deleted volume " + in_quotes(id) + " through plugin " + in_quotes(plugin_id) +
                              " and deregistered it",
                   .details = {{"plugin_id", plugin_id}, {"external_id", v->external_id}}});
  batch.erase_volume(id);
  auto index = store_.commit(std::move(batch));
  if (index) log_.info("volume deleted", {{"volume_id", id}, {"plugin_id", plugin_id}});
  return index;
}

void VolumeLifecycle::finish_delete_later(const std::string& plugin_id, const std::string& id,
                                          ::csi::v1::DeleteVolumeRequest request) {
  if (!finishing_.insert(id).second) return;  // one background delete per volume
  log_.warn("volume delete outcome unknown; retrying it in the background",
            {{"volume_id", id}, {"plugin_id", plugin_id}});
  if (!tasks_.spawn("finish delete " + id, finish_delete(plugin_id, id, std::move(request)))) finishing_.erase(id);
}

asio::awaitable<void> VolumeLifecycle::finish_delete(std::string plugin_id, std::string id,
                                                     ::csi::v1::DeleteVolumeRequest request) {
  std::function<asio::awaitable<async::Attempt>(unsigned)> attempt = [&](unsigned) -> asio::awaitable<async::Attempt> {
    const domain::Volume* v = store_.volume(id);
    if (!v || !v->deleting) co_return async::Attempt::ok();  // deleted or deregistered meanwhile
    auto r = co_await controller_.delete_volume(plugin_id, id, request);
    if (r.done()) {
      auto index = deregister_deleted(id, plugin_id);
      co_return index ? async::Attempt::ok() : async::Attempt::again(index.error());
    }
    if (!not_deleted(r)) co_return async::Attempt::again(r.error);
    auto index = mark_deleting(id, false, r.error);
    co_return index ? async::Attempt::final_error(r.error) : async::Attempt::again(index.error());
  };
  auto result = co_await async::retry(std::move(attempt), negation_retry());
  finishing_.erase(id);
  if (result.end == async::RetryEnd::stopped)
    log_.warn("the plugin refused the delete; the volume takes claims again",
              {{"volume_id", id}, {"plugin_id", plugin_id}, {"error", result.last_error}});
  else if (result.end == async::RetryEnd::exhausted)
    log_.error("background volume delete gave up; the volume stays marked as being deleted until a delete succeeds",
               {{"volume_id", id}, {"plugin_id", plugin_id}, {"error", result.last_error}});
}

void VolumeLifecycle::start() {
  for (const auto& [id, v] : store_.volumes())
    if (v.deleting) finish_delete_later(v.plugin_id, id, delete_request(v, {}));
}

}  // namespace mooring::controlplane::volumes
