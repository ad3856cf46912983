// The plugin's own listing of volumes, registered here or not (Nomad's "external" volumes): to a
// namespace token only those its namespaces register (acl::lists); the whole listing to
// management, or plugin:read with operator:read.
#include "services/controlplane/state/state_store.hpp"
#include "services/controlplane/volumes/controller_calls.hpp"
#include "services/controlplane/volumes/lifecycle_support.hpp"
#include "services/controlplane/volumes/volume_lifecycle.hpp"

namespace mooring::controlplane::volumes {

namespace asio = boost::asio;

namespace {

ExternalVolume external_of(const ::csi::v1::ListVolumesResponse::Entry& e) {
  const auto& v = e.volume();
  const auto& status = e.status();
  return ExternalVolume{.external_id = v.volume_id(),
                        .capacity = v.capacity_bytes(),
                        .context = StringMap(v.volume_context().begin(), v.volume_context().end()),
                        .snapshot_id = v.content_source().snapshot().snapshot_id(),
                        .clone_id = v.content_source().volume().volume_id(),
                        .published_node_ids = {status.published_node_ids().begin(), status.published_node_ids().end()},
                        .abnormal = status.volume_condition().abnormal(),
                        .status = status.volume_condition().message()};
}

}  // namespace

asio::awaitable<Outcome<Page<ExternalVolume>>> VolumeLifecycle::list_external(std::string plugin_id, PageRequest page,
                                                                              Asker asker) {
  const auto* p = store_.plugin(plugin_id);
  if (!p) co_return missing("plugin", plugin_id);
  if (!p->controllers.empty())
    if (auto no = unsupported(*p, &domain::ControllerInfo::supports_list_volumes,
                              "plugin " + in_quotes(plugin_id) + " does not support LIST_VOLUMES"))
      co_return *no;
  ::csi::v1::ListVolumesRequest csi;
  csi.set_max_entries(page.max_entries);
  csi.set_starting_token(page.token);
  auto res = co_await controller_.list_volumes(plugin_id, csi);
  if (!res.ok()) co_return listing_failure(res, page.token, plugin_id);
  Page<ExternalVolume> out;
  for (const auto& e : res.response.entries()) {
    auto item = external_of(e);
    acl::Owner owner;
    if (const auto* v = registering_volume(store_, plugin_id, item.external_id)) {
      owner = v->ns;
      item.ns = v->ns;
      item.volume_id = v->id;
    }
    if (acl::lists(asker.acl, owner, asker.ns)) out.items.push_back(std::move(item));
  }
  out.next_token = res.response.next_token();
  co_return out;
}

}  // namespace mooring::controlplane::volumes
