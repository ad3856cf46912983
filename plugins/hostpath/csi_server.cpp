#include "plugins/hostpath/csi_server.hpp"

#include <grpcpp/grpcpp.h>

#include "csi/v1/csi.grpc.pb.h"
#include "plugins/hostpath/call_gate.hpp"
#include "plugins/hostpath/controller.hpp"
#include "plugins/hostpath/identity.hpp"
#include "plugins/hostpath/node.hpp"

namespace mooring::hostpath {
namespace {

using grpc::ServerContext;
using grpc::Status;
namespace v1 = csi::v1;
using ProtoMap = google::protobuf::Map<std::string, std::string>;

// What each request carries for the call log: parameters and contexts as sent, secrets as a digest.
StringMap sorted(const ProtoMap& m) { return {m.begin(), m.end()}; }
std::string digest(const ProtoMap& secrets) { return secrets_digest(sorted(secrets)); }

RequestDetail detail(const v1::CreateVolumeRequest& r) {
  const auto& src = r.volume_content_source();
  std::string source;
  if (src.has_snapshot()) source = "snapshot:" + src.snapshot().snapshot_id();
  if (src.has_volume()) source = "volume:" + src.volume().volume_id();
  return {.parameters = sorted(r.parameters()), .secrets_sha256 = digest(r.secrets()), .content_source = source};
}
RequestDetail detail(const v1::ControllerPublishVolumeRequest& r) {
  return {.volume_context = sorted(r.volume_context()), .secrets_sha256 = digest(r.secrets())};
}
RequestDetail detail(const v1::ValidateVolumeCapabilitiesRequest& r) {
  return {.parameters = sorted(r.parameters()),
          .volume_context = sorted(r.volume_context()),
          .secrets_sha256 = digest(r.secrets())};
}
RequestDetail detail(const v1::ControllerModifyVolumeRequest& r) {
  return {.parameters = sorted(r.mutable_parameters()), .secrets_sha256 = digest(r.secrets())};
}
RequestDetail detail(const v1::CreateSnapshotRequest& r) {
  return {.parameters = sorted(r.parameters()), .secrets_sha256 = digest(r.secrets())};
}
RequestDetail detail(const v1::CreateVolumeGroupSnapshotRequest& r) {
  return {.parameters = sorted(r.parameters()), .secrets_sha256 = digest(r.secrets())};
}
template <class NodeRequest>  // NodeStageVolume, NodePublishVolume
RequestDetail node_detail(const NodeRequest& r) {
  return {.volume_context = sorted(r.volume_context()),
          .publish_context = sorted(r.publish_context()),
          .secrets_sha256 = digest(r.secrets())};
}
template <class Request>  // the calls whose only extra is their secrets
RequestDetail secrets_only(const Request& r) {
  return {.secrets_sha256 = digest(r.secrets())};
}

class IdentityService final : public v1::Identity::Service {
 public:
  explicit IdentityService(const CsiHandlers& h) : h_(h) {}
  Status GetPluginInfo(ServerContext* ctx, const v1::GetPluginInfoRequest*, v1::GetPluginInfoResponse* resp) override {
    return h_.gate->run(*ctx, {"GetPluginInfo", "", "", ""}, [&] { return h_.identity->plugin_info(*resp); });
  }
  Status GetPluginCapabilities(ServerContext* ctx, const v1::GetPluginCapabilitiesRequest*,
                               v1::GetPluginCapabilitiesResponse* resp) override {
    return h_.gate->run(*ctx, {"GetPluginCapabilities", "", "", ""},
                        [&] { return h_.identity->plugin_capabilities(*resp); });
  }
  Status Probe(ServerContext* ctx, const v1::ProbeRequest*, v1::ProbeResponse* resp) override {
    return h_.gate->run(*ctx, {"Probe", "", "", ""}, [&] { return h_.identity->probe(*resp); });
  }

 private:
  const CsiHandlers& h_;
};

class ControllerService final : public v1::Controller::Service {
 public:
  explicit ControllerService(const CsiHandlers& h) : h_(h), c_(*h.controller) {}
  Status CreateVolume(ServerContext* ctx, const v1::CreateVolumeRequest* req, v1::CreateVolumeResponse* resp) override {
    return h_.gate->run(*ctx, {"CreateVolume", req->name(), "", "", detail(*req)},
                        [&] { return c_.create_volume(*req, *resp); });
  }
  Status DeleteVolume(ServerContext* ctx, const v1::DeleteVolumeRequest* req, v1::DeleteVolumeResponse*) override {
    return h_.gate->run(*ctx, {"DeleteVolume", req->volume_id(), "", "", secrets_only(*req)},
                        [&] { return c_.delete_volume(*req); });
  }
  Status ControllerPublishVolume(ServerContext* ctx, const v1::ControllerPublishVolumeRequest* req,
                                 v1::ControllerPublishVolumeResponse* resp) override {
    return h_.gate->run(*ctx, {"ControllerPublishVolume", req->volume_id(), req->node_id(), "", detail(*req)},
                        [&] { return c_.publish(*req, *resp); });
  }
  Status ControllerUnpublishVolume(ServerContext* ctx, const v1::ControllerUnpublishVolumeRequest* req,
                                   v1::ControllerUnpublishVolumeResponse*) override {
    return h_.gate->run(*ctx, {"ControllerUnpublishVolume", req->volume_id(), req->node_id(), "", secrets_only(*req)},
                        [&] { return c_.unpublish(*req); });
  }
  Status ValidateVolumeCapabilities(ServerContext* ctx, const v1::ValidateVolumeCapabilitiesRequest* req,
                                    v1::ValidateVolumeCapabilitiesResponse* resp) override {
    return h_.gate->run(*ctx, {"ValidateVolumeCapabilities", req->volume_id(), "", "", detail(*req)},
                        [&] { return c_.validate_capabilities(*req, *resp); });
  }
  Status ListVolumes(ServerContext* ctx, const v1::ListVolumesRequest* req, v1::ListVolumesResponse* resp) override {
    return h_.gate->run(*ctx, {"ListVolumes", "", "", ""}, [&] { return c_.list_volumes(*req, *resp); });
  }
  Status GetCapacity(ServerContext* ctx, const v1::GetCapacityRequest* req, v1::GetCapacityResponse* resp) override {
    return h_.gate->run(*ctx, {"GetCapacity", "", "", ""}, [&] { return c_.get_capacity(*req, *resp); });
  }
  Status ControllerGetCapabilities(ServerContext* ctx, const v1::ControllerGetCapabilitiesRequest*,
                                   v1::ControllerGetCapabilitiesResponse* resp) override {
    return h_.gate->run(*ctx, {"ControllerGetCapabilities", "", "", ""}, [&] { return c_.get_capabilities(*resp); });
  }
  Status CreateSnapshot(ServerContext* ctx, const v1::CreateSnapshotRequest* req,
                        v1::CreateSnapshotResponse* resp) override {
    return h_.gate->run(*ctx, {"CreateSnapshot", req->source_volume_id(), "", "", detail(*req)},
                        [&] { return c_.create_snapshot(*req, *resp); });
  }
  Status DeleteSnapshot(ServerContext* ctx, const v1::DeleteSnapshotRequest* req,
                        v1::DeleteSnapshotResponse*) override {
    return h_.gate->run(*ctx, {"DeleteSnapshot", "", "", "", secrets_only(*req)},
                        [&] { return c_.delete_snapshot(*req); });
  }
  Status ListSnapshots(ServerContext* ctx, const v1::ListSnapshotsRequest* req,
                       v1::ListSnapshotsResponse* resp) override {
    return h_.gate->run(*ctx, {"ListSnapshots", req->source_volume_id(), "", "", secrets_only(*req)},
                        [&] { return c_.list_snapshots(*req, *resp); });
  }
  Status ControllerExpandVolume(ServerContext* ctx, const v1::ControllerExpandVolumeRequest* req,
                                v1::ControllerExpandVolumeResponse* resp) override {
    return h_.gate->run(*ctx, {"ControllerExpandVolume", req->volume_id(), "", "", secrets_only(*req)},
                        [&] { return c_.expand_volume(*req, *resp); });
  }
  Status ControllerGetVolume(ServerContext* ctx, const v1::ControllerGetVolumeRequest* req,
                             v1::ControllerGetVolumeResponse* resp) override {
    return h_.gate->run(*ctx, {"ControllerGetVolume", req->volume_id(), "", ""},
                        [&] { return c_.get_volume(*req, *resp); });
  }
  Status ControllerModifyVolume(ServerContext* ctx, const v1::ControllerModifyVolumeRequest* req,
                                v1::ControllerModifyVolumeResponse*) override {
    return h_.gate->run(*ctx, {"ControllerModifyVolume", req->volume_id(), "", "", detail(*req)},
                        [&] { return c_.modify_volume(*req); });
  }
  Status GetSnapshot(ServerContext* ctx, const v1::GetSnapshotRequest* req, v1::GetSnapshotResponse* resp) override {
    return h_.gate->run(*ctx, {"GetSnapshot", "", "", "", secrets_only(*req)},
                        [&] { return c_.get_snapshot(*req, *resp); });
  }

 private:
  const CsiHandlers& h_;
  Controller& c_;
};

// Served with the Controller service: group snapshots are controller operations on the catalogue.
class GroupControllerService final : public v1::GroupController::Service {
 public:
  explicit GroupControllerService(const CsiHandlers& h) : h_(h), c_(*h.controller) {}
  Status GroupControllerGetCapabilities(ServerContext* ctx, const v1::GroupControllerGetCapabilitiesRequest*,
                                        v1::GroupControllerGetCapabilitiesResponse* resp) override {
    return h_.gate->run(*ctx, {"GroupControllerGetCapabilities", "", "", ""},
                        [&] { return c_.group_capabilities(*resp); });
  }
  Status CreateVolumeGroupSnapshot(ServerContext* ctx, const v1::CreateVolumeGroupSnapshotRequest* req,
                                   v1::CreateVolumeGroupSnapshotResponse* resp) override {
    return h_.gate->run(*ctx, {"CreateVolumeGroupSnapshot", req->name(), "", "", detail(*req)},
                        [&] { return c_.create_group_snapshot(*req, *resp); });
  }
  Status DeleteVolumeGroupSnapshot(ServerContext* ctx, const v1::DeleteVolumeGroupSnapshotRequest* req,
                                   v1::DeleteVolumeGroupSnapshotResponse*) override {
    return h_.gate->run(*ctx, {"DeleteVolumeGroupSnapshot", req->group_snapshot_id(), "", "", secrets_only(*req)},
                        [&] { return c_.delete_group_snapshot(*req); });
  }
  Status GetVolumeGroupSnapshot(ServerContext* ctx, const v1::GetVolumeGroupSnapshotRequest* req,
                                v1::GetVolumeGroupSnapshotResponse* resp) override {
    return h_.gate->run(*ctx, {"GetVolumeGroupSnapshot", req->group_snapshot_id(), "", "", secrets_only(*req)},
                        [&] { return c_.get_group_snapshot(*req, *resp); });
  }

 private:
  const CsiHandlers& h_;
  Controller& c_;
};

class NodeService final : public v1::Node::Service {
 public:
  explicit NodeService(const CsiHandlers& h) : h_(h), n_(*h.node) {}
  Status NodeStageVolume(ServerContext* ctx, const v1::NodeStageVolumeRequest* req,
                         v1::NodeStageVolumeResponse*) override {
    return h_.gate->run(
        *ctx, {"NodeStageVolume", req->volume_id(), h_.node_id, req->staging_target_path(), node_detail(*req)},
        [&] { return n_.stage(*req); });
  }
  Status NodeUnstageVolume(ServerContext* ctx, const v1::NodeUnstageVolumeRequest* req,
                           v1::NodeUnstageVolumeResponse*) override {
    return h_.gate->run(*ctx, {"NodeUnstageVolume", req->volume_id(), h_.node_id, req->staging_target_path()},
                        [&] { return n_.unstage(*req); });
  }
  Status NodePublishVolume(ServerContext* ctx, const v1::NodePublishVolumeRequest* req,
                           v1::NodePublishVolumeResponse*) override {
    return h_.gate->run(*ctx,
                        {"NodePublishVolume", req->volume_id(), h_.node_id, req->target_path(), node_detail(*req)},
                        [&] { return n_.publish(*req); });
  }
  Status NodeUnpublishVolume(ServerContext* ctx, const v1::NodeUnpublishVolumeRequest* req,
                             v1::NodeUnpublishVolumeResponse*) override {
    return h_.gate->run(*ctx, {"NodeUnpublishVolume", req->volume_id(), h_.node_id, req->target_path()},
                        [&] { return n_.unpublish(*req); });
  }
  Status NodeGetVolumeStats(ServerContext* ctx, const v1::NodeGetVolumeStatsRequest* req,
                            v1::NodeGetVolumeStatsResponse* resp) override {
    return h_.gate->run(
        *ctx, {"NodeGetVolumeStats", req->volume_id(), h_.node_id, req->volume_path()},
        [&] { return n_.volume_stats(*req, *resp); },
        [&](const std::string& why) {
          resp->mutable_volume_condition()->set_abnormal(true);
          resp->mutable_volume_condition()->set_message(why);
        });
  }
  Status NodeExpandVolume(ServerContext* ctx, const v1::NodeExpandVolumeRequest* req,
                          v1::NodeExpandVolumeResponse* resp) override {
    return h_.gate->run(*ctx,
                        {"NodeExpandVolume", req->volume_id(), h_.node_id, req->volume_path(), secrets_only(*req)},
                        [&] { return n_.expand(*req, *resp); });
  }
  Status NodeGetCapabilities(ServerContext* ctx, const v1::NodeGetCapabilitiesRequest*,
                             v1::NodeGetCapabilitiesResponse* resp) override {
    return h_.gate->run(*ctx, {"NodeGetCapabilities", "", h_.node_id, ""}, [&] { return n_.get_capabilities(*resp); });
  }
  Status NodeGetInfo(ServerContext* ctx, const v1::NodeGetInfoRequest*, v1::NodeGetInfoResponse* resp) override {
    return h_.gate->run(*ctx, {"NodeGetInfo", "", h_.node_id, ""}, [&] { return n_.get_info(*resp); });
  }

 private:
  const CsiHandlers& h_;
  Node& n_;
};

}  // namespace

struct CsiServer::Impl {
  CsiHandlers handlers;
  std::unique_ptr<IdentityService> identity;
  std::unique_ptr<ControllerService> controller;
  std::unique_ptr<GroupControllerService> group_controller;
  std::unique_ptr<NodeService> node;
  std::unique_ptr<grpc::Server> server;
};

CsiServer::CsiServer() : impl_(std::make_unique<Impl>()) {}

CsiServer::~CsiServer() { shutdown(std::chrono::milliseconds(0)); }

std::string CsiServer::start(const std::string& endpoint, const CsiHandlers& handlers) {
  impl_->handlers = handlers;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(endpoint, grpc::InsecureServerCredentials());
  // The sync server runs each call on a polling thread and, by default, lets at most two idle
  // pollers live: under eight concurrent lifecycles it created and destroyed a thread for most
  // calls (about 100 per second in the lifecycle bench). Keeping up to 16 idle threads costs a
  // few pages of stack each and ends the churn.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 16);
  impl_->identity = std::make_unique<IdentityService>(impl_->handlers);
  builder.RegisterService(impl_->identity.get());
  if (handlers.controller) {
    impl_->controller = std::make_unique<ControllerService>(impl_->handlers);
    builder.RegisterService(impl_->controller.get());
    impl_->group_controller = std::make_unique<GroupControllerService>(impl_->handlers);
    builder.RegisterService(impl_->group_controller.get());
  }
  if (handlers.node) {
    impl_->node = std::make_unique<NodeService>(impl_->handlers);
    builder.RegisterService(impl_->node.get());
  }
  impl_->server = builder.BuildAndStart();
  if (!impl_->server) return "cannot listen on " + endpoint;
  return {};
}

void CsiServer::shutdown(std::chrono::milliseconds grace) {
  if (!impl_->server) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace mooring::hostpath
