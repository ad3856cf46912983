// GC room: a resumed release's question before it sends a ControllerUnpublish again (the claim
// GC, claim_gc.hpp): does the plugin still have the volume published to the node?
#include "services/controlplane/gc/claim_gc.hpp"
#include "services/controlplane/gc/release_calls.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/csi/published_check.hpp"

namespace mooring::controlplane::gc {

namespace asio = boost::asio;

asio::awaitable<ClaimGc::PublishedCheck> ClaimGc::still_published(const domain::Volume& v,
                                                                  const std::string& csi_node_id) {
  // CSI: published node ids are reported only with LIST_VOLUMES_PUBLISHED_NODES.
  bool get = false, list = false;
  if (const auto* p = store_.plugin(v.plugin_id))
    for (const auto& [node_id, inst] : p->controllers) {
      if (!inst.healthy || !inst.controller_info || !inst.controller_info->supports_list_volumes_attached_nodes)
        continue;
      get = get || inst.controller_info->supports_get;
      list = list || inst.controller_info->supports_list_volumes;
    }
  // Not reached (no controller, the agent restarting, a timeout): the unpublish would not get
  // through either, or would get through a moment later without the check — retry the step.
  // (NOT_FOUND is an answer: the volume is gone, and the unpublish will say "already done".)
  auto unreachable = [](const auto& res) {
    return res.no_target || (csi::should_retry(res.outcome) && res.status.error_code() != grpc::StatusCode::NOT_FOUND);
  };
  auto ask_get = [&]() -> asio::awaitable<csi::QueryAnswer<::csi::v1::ControllerGetVolumeResponse>> {
    ::csi::v1::ControllerGetVolumeRequest req;
    req.set_volume_id(v.external_id);
    std::string plugin_id = v.plugin_id, key = domain::volume_key(v.ns, v.id);
    auto res = co_await agents_.controller_get_volume(std::move(plugin_id), std::move(key), std::move(req));
    co_return csi::QueryAnswer<::csi::v1::ControllerGetVolumeResponse>{res.ok(), unreachable(res), res.error,
                                                                       std::move(res.response)};
  };
  auto ask_list = [&](std::string token) -> asio::awaitable<csi::QueryAnswer<::csi::v1::ListVolumesResponse>> {
    ::csi::v1::ListVolumesRequest req;
    req.set_starting_token(token);
    std::string plugin_id = v.plugin_id;
    auto res = co_await agents_.list_volumes(std::move(plugin_id), std::move(req));
    co_return csi::QueryAnswer<::csi::v1::ListVolumesResponse>{res.ok(), unreachable(res), res.error,
                                                               std::move(res.response)};
  };
  auto check = co_await csi::published_to_node(get, list, v.external_id, csi_node_id, ask_get, ask_list);
  if (!check.published && check.unreachable.empty())
    for (const auto& note : check.notes)
      log_.info("resumed release: " + note + "; unpublishing without knowing",
                {{"volume_id", v.id}, {"plugin_id", v.plugin_id}});
  co_return PublishedCheck{check.published, check.unreachable};
}

}  // namespace mooring::controlplane::gc
