// mooring-hostpath: the Controller's publications (ControllerPublishVolume and
// ControllerUnpublishVolume): a record of which CSI node may use a volume, with the access mode's
// single-node and single-writer rules and a node's max_volumes enforced here.
#include <algorithm>

#include "plugins/hostpath/controller.hpp"
#include "plugins/hostpath/node_state.hpp"
#include "plugins/hostpath/volume_capability.hpp"
#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

using grpc::Status;
using grpc::StatusCode;

const log::Logger kLog{"controller"};

}  // namespace

Status Controller::publish(const csi::v1::ControllerPublishVolumeRequest& req,
                           csi::v1::ControllerPublishVolumeResponse& resp) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (req.node_id().empty()) return invalid("node_id is required");
  if (!req.has_volume_capability()) return invalid("volume_capability is required");
  if (auto st = check_capability(req.volume_capability(), "volume_capability"); !st.ok()) return st;

  const auto nodes = registered_nodes(config_.data_dir);
  const NodeRegistration* node = nullptr;
  for (const auto& n : nodes) {
    if (n.node_id == req.node_id()) node = &n;
  }
  const bool known = node != nullptr || req.node_id() == config_.own_node_id ||
                     std::any_of(config_.known_nodes.begin(), config_.known_nodes.end(),
                                 [&](const std::string& k) { return k == "*" || k == req.node_id(); });
  const int mode = req.volume_capability().access_mode().mode();
  const bool readonly = req.readonly();

  return store_.transact([&](StoreTxn& txn) -> Status {
    const StoreState& state = txn.state();
    auto it = state.volumes.find(req.volume_id());
    if (it == state.volumes.end()) return {StatusCode::NOT_FOUND, "volume " + req.volume_id() + " not found"};
    if (!known)
      return {StatusCode::NOT_FOUND, "node " + req.node_id() + " not found (not registered with this plugin)"};
    const VolumeRecord& v = it->second;
    if (auto why = access_type_mismatch(req.volume_capability(), v.id, v.block); !why.empty())
      return invalid("volume_capability: " + why);
    (*resp.mutable_publish_context())["node_id"] = req.node_id();
    (*resp.mutable_publish_context())["readonly"] = readonly ? "true" : "false";
    for (const auto& p : v.publications) {
      if (p.node_id != req.node_id()) continue;
      if (p.readonly != readonly || p.access_mode != mode) {
        return {StatusCode::ALREADY_EXISTS, "volume " + v.id + " is already published to node " + p.node_id +
                                                " with a different readonly flag or access mode"};
      }
      return Status::OK;  // same publication again
    }
    for (const auto& p : v.publications) {
      if (is_single_node_mode(mode) || is_single_node_mode(p.access_mode)) {
        return {StatusCode::FAILED_PRECONDITION,
                "volume " + v.id + " is already published to node " + p.node_id +
                    " and its access mode allows a single node; unpublish it there first"};
      }
      if (mode == csi::v1::VolumeCapability::AccessMode::MULTI_NODE_SINGLE_WRITER && !readonly && !p.readonly) {
        return {StatusCode::FAILED_PRECONDITION, "volume " + v.id + " already has a writer on node " + p.node_id +
                                                     " (MULTI_NODE_SINGLE_WRITER); unpublish it there first"};
      }
    }
    if (const auto max = node ? current_max_volumes(*node) : 0; max > 0) {
      std::int64_t on_node = 0;
      for (const auto& [id, other] : state.volumes) {
        for (const auto& p : other.publications) on_node += p.node_id == req.node_id() ? 1 : 0;
      }
      if (on_node >= max) {
        return {StatusCode::RESOURCE_EXHAUSTED,
                "node " + req.node_id() + " already has its maximum of " + std::to_string(max) + " volumes published"};
      }
    }
    txn.edit_volume(v.id)->publications.push_back({req.node_id(), readonly, mode});
    kLog.info("volume published", {{"volume_id", v.id}, {"node_id", req.node_id()}, {"readonly", readonly}});
    return Status::OK;
  });
}

Status Controller::unpublish(const csi::v1::ControllerUnpublishVolumeRequest& req) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  return store_.transact([&](StoreTxn& txn) -> Status {
    const auto it = txn.state().volumes.find(req.volume_id());
    if (it == txn.state().volumes.end()) return Status::OK;  // nothing is published for an unknown volume
    auto matches = [&](const Publication& p) { return req.node_id().empty() || p.node_id == req.node_id(); };
    if (std::none_of(it->second.publications.begin(), it->second.publications.end(), matches)) return Status::OK;
    std::erase_if(txn.edit_volume(req.volume_id())->publications, matches);
    kLog.info("volume unpublished", {{"volume_id", req.volume_id()}, {"node_id", req.node_id()}});
    return Status::OK;
  });
}

}  // namespace mooring::hostpath
