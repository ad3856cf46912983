// API room: the endpoints that need a controller plugin, reached through a node agent that runs
// a healthy controller instance (agentclient/AgentRouter): create and delete volumes, operator
// detach, snapshots and the external volume listing. They await RPCs, so they are added to the
// Api as asynchronous routes at wiring time. Plugin secrets may also come in the header
// `X-Mooring-CSI-Secrets: k=v,k2=v2` (or Nomad's `X-Nomad-CSI-Secrets`); they are passed to
// the plugin and never logged or returned.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "services/controlplane/http/message.hpp"
#include "shared/async/task_group.hpp"
#include "shared/domain/result.hpp"
#include "shared/log/log.hpp"

namespace csi::v1 {  // passed by value, so only declared here (the protos stay out of this header)
class CreateVolumeRequest;
class CreateSnapshotRequest;
class DeleteVolumeRequest;
}  // namespace csi::v1

namespace mooring::domain {
struct Volume;
}

namespace mooring::controlplane {
class StateStore;
namespace agentclient {
class AgentRouter;
}
namespace gc {
class ClaimGc;
}
}  // namespace mooring::controlplane

namespace mooring::controlplane::api {

class Api;

class ControllerEndpoints {
 public:
  // `gc` (optional) is told to retry a detached volume's release at once.
  ControllerEndpoints(boost::asio::any_io_executor executor, StateStore& store, agentclient::AgentRouter& router,
                      gc::ClaimGc* gc = nullptr);
  ~ControllerEndpoints();
  ControllerEndpoints(const ControllerEndpoints&) = delete;
  ControllerEndpoints& operator=(const ControllerEndpoints&) = delete;

  // PUT /v1/volume/csi/:id/create, DELETE /v1/volume/csi/:id/delete, DELETE /v1/volume/csi/:id/detach,
  // GET/PUT/POST/DELETE /v1/volumes/snapshot, GET /v1/volumes/external.
  void add_routes(Api& api);
  // Resumes, in the background, the deletes whose outcome was unknown when the process stopped
  // (volumes still marked Deleting).
  void start();
  // Cancels background negations (an abandoned create's DeleteVolume) and background deletes,
  // and waits for them.
  boost::asio::awaitable<void> stop();

  // PUT /v1/volume/csi/:id: a re-registration that raises RequestedCapacityMin above the
  // volume's capacity expands it (ControllerExpandVolume, then NodeExpandVolume for every live
  // claim when the plugin asks for it); any other registration goes to the built-in endpoint.
  boost::asio::awaitable<http::Response> register_or_expand(http::Request req);
  boost::asio::awaitable<http::Response> create_volume(http::Request req);
  boost::asio::awaitable<http::Response> delete_volume(http::Request req);
  boost::asio::awaitable<http::Response> detach_volume(http::Request req);
  boost::asio::awaitable<http::Response> create_snapshot(http::Request req);
  boost::asio::awaitable<http::Response> delete_snapshot(http::Request req);
  boost::asio::awaitable<http::Response> list_snapshots(http::Request req);
  boost::asio::awaitable<http::Response> list_external_volumes(http::Request req);

 private:
  // Undo a create whose outcome is unknown: the same request again (idempotent on its name, and
  // a plugin refuses one without its capabilities) tells what exists, which is then deleted.
  boost::asio::awaitable<void> negate_create(std::string plugin_id, std::string volume_id,
                                             ::csi::v1::CreateVolumeRequest request);
  boost::asio::awaitable<void> negate_snapshot(std::string plugin_id, ::csi::v1::CreateSnapshotRequest request);
  // The volume `id` is registered with this provider id (a concurrent create of the same id won).
  bool registered_as(const std::string& id, const std::string& external_id) const;

  // ---- delete: the volume is marked Deleting before DeleteVolume is sent ----
  static ::csi::v1::DeleteVolumeRequest delete_request(const domain::Volume& v,
                                                       const std::map<std::string, std::string>& extra_secrets);
  // Sets or clears the mark; clearing records why (the plugin's refusal) in an event.
  domain::Expected<std::uint64_t> mark_deleting(const std::string& id, bool deleting, const std::string& refused_because);
  // The plugin deleted it: deregister with a VolumeDeleted event.
  domain::Expected<std::uint64_t> deregister_deleted(const std::string& id, const std::string& plugin_id);
  // Retries DeleteVolume in the background until the plugin gives a final answer (at most one
  // task per volume).
  void finish_delete_later(const std::string& plugin_id, const std::string& id, ::csi::v1::DeleteVolumeRequest request);

  StateStore& store_;
  agentclient::AgentRouter& router_;
  gc::ClaimGc* gc_;
  Api* api_ = nullptr;  // set by add_routes: the fallback for plain registrations
  std::set<std::string> finishing_;  // volumes with a background delete running
  log::Logger log_{"controller-api"};
  async::TaskGroup tasks_;  // last
};

// "k=v,k2=v2" -> map. Values may contain '='; empty entries are skipped. The error names the
// header and the malformed entry's position (never its value: it is a secret).
domain::Expected<std::map<std::string, std::string>> parse_secrets_header(std::string_view text);

}  // namespace mooring::controlplane::api
