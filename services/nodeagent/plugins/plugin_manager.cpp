#include "services/nodeagent/plugins/plugin_manager.hpp"

#include <functional>

#include "csi/v1/csi.pb.h"
#include "services/nodeagent/controlplane/node_status.hpp"
#include "services/nodeagent/plugins/registry.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/log/log.hpp"
#include "shared/rpc/csi_client.hpp"

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
namespace csiv1 = ::csi::v1;

const log::Logger kLog{"plugins"};

// One plugin instance's calls over its socket's shared channel, for both consumers: the
// supervisor (identity and capabilities) and the volume manager (node calls). Each call holds
// the channel, so a call in flight survives a replaced instance. close() fails only this object's
// calls: the channel stays usable for the other users.
//
// `current` (the volume manager's clients only) names the channel of the instance that serves
// the plugin now. A node call that fails UNAVAILABLE on an instance the registry has replaced
// meanwhile (a rolling upgrade: the old copy went away, or is draining and refuses new calls) is
// sent once more to the new instance instead of failing: node calls are idempotent, and
// UNAVAILABLE is a transport failure or a refusal that did nothing.
using CurrentChannel = std::function<std::shared_ptr<rpc::CsiClient>()>;

class InstanceClient final : public PluginClient, public NodeVolumeCalls {
 public:
  explicit InstanceClient(std::shared_ptr<rpc::CsiClient> channel, CurrentChannel current = {})
      : channel_(std::move(channel)), current_(std::move(current)) {}

  asio::awaitable<grpc::Status> get_plugin_info(csiv1::GetPluginInfoResponse& out) override {
    return fetch(csi::Rpc::GetPluginInfo, &rpc::CsiClient::get_plugin_info, out);
  }
  asio::awaitable<grpc::Status> get_plugin_capabilities(csiv1::GetPluginCapabilitiesResponse& out) override {
    return fetch(csi::Rpc::GetPluginCapabilities, &rpc::CsiClient::get_plugin_capabilities, out);
  }
  asio::awaitable<grpc::Status> probe(csiv1::ProbeResponse& out) override {
    return fetch(csi::Rpc::Probe, &rpc::CsiClient::probe, out);
  }
  asio::awaitable<grpc::Status> controller_get_capabilities(csiv1::ControllerGetCapabilitiesResponse& out) override {
    return fetch(csi::Rpc::ControllerGetCapabilities, &rpc::CsiClient::controller_get_capabilities, out);
  }
  asio::awaitable<grpc::Status> group_controller_get_capabilities(
      csiv1::GroupControllerGetCapabilitiesResponse& out) override {
    return fetch(csi::Rpc::GroupControllerGetCapabilities, &rpc::CsiClient::group_controller_get_capabilities, out);
  }
  asio::awaitable<grpc::Status> node_get_capabilities(csiv1::NodeGetCapabilitiesResponse& out) override {
    return fetch(csi::Rpc::NodeGetCapabilities, &rpc::CsiClient::node_get_capabilities, out);
  }
  asio::awaitable<grpc::Status> node_get_info(csiv1::NodeGetInfoResponse& out) override {
    return fetch(csi::Rpc::NodeGetInfo, &rpc::CsiClient::node_get_info, out);
  }
  void close(std::string reason) override { closed_ = std::move(reason); }

  rpc::CsiClient::Call<csiv1::NodeStageVolumeResponse> stage(const csiv1::NodeStageVolumeRequest& request) override {
    return call(csi::Rpc::NodeStageVolume, &rpc::CsiClient::node_stage_volume, request);
  }
  rpc::CsiClient::Call<csiv1::NodeUnstageVolumeResponse> unstage(
      const csiv1::NodeUnstageVolumeRequest& request) override {
    return call(csi::Rpc::NodeUnstageVolume, &rpc::CsiClient::node_unstage_volume, request);
  }
  rpc::CsiClient::Call<csiv1::NodePublishVolumeResponse> publish(
      const csiv1::NodePublishVolumeRequest& request) override {
    return call(csi::Rpc::NodePublishVolume, &rpc::CsiClient::node_publish_volume, request);
  }
  rpc::CsiClient::Call<csiv1::NodeUnpublishVolumeResponse> unpublish(
      const csiv1::NodeUnpublishVolumeRequest& request) override {
    return call(csi::Rpc::NodeUnpublishVolume, &rpc::CsiClient::node_unpublish_volume, request);
  }
  rpc::CsiClient::Call<csiv1::NodeExpandVolumeResponse> expand(const csiv1::NodeExpandVolumeRequest& request) override {
    return call(csi::Rpc::NodeExpandVolume, &rpc::CsiClient::node_expand_volume, request);
  }
  rpc::CsiClient::Call<csiv1::NodeGetVolumeStatsResponse> stats(
      const csiv1::NodeGetVolumeStatsRequest& request) override {
    return call(csi::Rpc::NodeGetVolumeStats, &rpc::CsiClient::node_get_volume_stats, request);
  }

 private:
  template <class Response, class Request>
  rpc::CsiClient::Call<Response> call(csi::Rpc which,
                                      rpc::CsiClient::Call<Response> (rpc::CsiClient::*method)(const Request&,
                                                                                               rpc::CsiCallOptions),
                                      const Request& request) {
    auto channel = channel_;  // in the coroutine frame: the call keeps the channel alive
    if (!closed_.empty()) {
      rpc::CsiResult<Response> result;
      result.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin client closed: " + closed_);
      result.outcome = csi::classify(which, grpc::StatusCode::UNAVAILABLE);
      co_return result;
    }
    auto result = co_await ((*channel).*method)(request, rpc::CsiCallOptions{});
    if (result.status.error_code() == grpc::StatusCode::UNAVAILABLE && current_) {
      if (auto now = current_(); now && now != channel) {
        kLog.info("instance replaced during the call; sending it to the new one",
                  {{"rpc", csi::to_string(which)},
                   {"from", channel->endpoint()},
                   {"to", now->endpoint()},
                   {"error", result.status.error_message()}});
        channel = std::move(now);
        result = co_await ((*channel).*method)(request, rpc::CsiCallOptions{});
      }
    }
    co_return result;
  }
  template <class Response, class Request>
  asio::awaitable<grpc::Status> fetch(csi::Rpc which,
                                      rpc::CsiClient::Call<Response> (rpc::CsiClient::*method)(const Request&,
                                                                                               rpc::CsiCallOptions),
                                      Response& out) {
    Request request;  // in this frame: it must outlive the call
    auto result = co_await call(which, method, request);
    if (result.ok()) out = std::move(result.response);
    co_return result.status;
  }

  std::shared_ptr<rpc::CsiClient> channel_;
  CurrentChannel current_;
  std::string closed_;
};

}  // namespace

PluginManager::PluginManager(asio::any_io_executor ex, PluginRegistry& registry, NodeStatus& status)
    : ex_(std::move(ex)), registry_(registry), status_(status) {}

PluginManager::~PluginManager() = default;

std::unique_ptr<PluginClient> PluginManager::supervisor_client(const std::string& plugin_id,
                                                               const std::string& socket_path) {
  return std::make_unique<InstanceClient>(channel(socket_path, plugin_id));
}

std::optional<PluginManager::Healthy> PluginManager::healthy(PluginKind kind, const std::string& plugin_id) const {
  if (plugin_id.empty()) return std::nullopt;
  const auto inst = registry_.lookup(kind, plugin_id);
  if (!inst) return std::nullopt;
  // A split plugin's controller and node instances are healthy (or not) each on their own.
  // The registered instance's own fingerprint: with two allocations running the plugin (an
  // upgrade step), the one the registry serves is healthy or not on its own.
  const auto fp = status_.fingerprint(
      plugin_id,
      kind == PluginKind::controller ? ::mooring::v1::PLUGIN_TYPE_CONTROLLER : ::mooring::v1::PLUGIN_TYPE_NODE,
      inst->reg.alloc_id);
  if (!fp || !fp->healthy()) return std::nullopt;
  const auto& info = fp->node_info();
  return Healthy{inst->reg.socket_path, info.requires_node_stage_volume(), info.supports_expand(),
                 info.supports_stats(), info.supports_condition(),         info.supports_volume_mount_group()};
}

std::shared_ptr<rpc::CsiClient> PluginManager::healthy_client(PluginKind kind, const std::string& plugin_id) {
  const auto h = healthy(kind, plugin_id);
  return h ? channel(h->socket, plugin_id) : nullptr;
}

std::optional<NodePlugin> PluginManager::find(const std::string& plugin_id) {
  const auto h = healthy(PluginKind::node, plugin_id);
  if (!h) return std::nullopt;
  // The volume manager's calls outlive neither the agent's executor nor this manager (its task
  // groups are joined before the manager goes).
  auto current = [this, plugin_id] { return healthy_client(PluginKind::node, plugin_id); };
  return NodePlugin{std::make_shared<InstanceClient>(channel(h->socket, plugin_id), std::move(current)),
                    h->requires_stage,
                    h->supports_expand,
                    h->supports_stats,
                    h->supports_condition,
                    h->supports_mount_group};
}

async::WakeSignal& PluginManager::healthy_again(const std::string& plugin_id) {
  auto& signal = signals_[plugin_id];
  if (!signal) signal = std::make_unique<async::WakeSignal>(ex_);
  return *signal;
}

void PluginManager::status_changed() {
  std::map<std::string, Healthy> now;
  for (const auto& inst : registry_.list(PluginKind::node)) {
    if (auto h = healthy(PluginKind::node, inst.reg.plugin_id)) now.emplace(inst.reg.plugin_id, std::move(*h));
  }
  for (const auto& [id, h] : now) {
    auto it = healthy_nodes_.find(id);
    if (it == healthy_nodes_.end() || it->second != h) healthy_again(id).notify();
  }
  healthy_nodes_ = std::move(now);
}

std::shared_ptr<rpc::CsiClient> PluginManager::channel(const std::string& socket_path, const std::string& plugin_id) {
  auto& c = channels_[socket_path];
  if (!c || c->closed()) {
    c = std::make_shared<rpc::CsiClient>(ex_, socket_path);
    c->set_metrics_plugin(plugin_id);
  }
  return c;
}

void PluginManager::close_all() {
  for (auto& [_, c] : channels_) c->close();
}

}  // namespace mooring::nodeagent
