// mooring-hostpath: the CSI Controller service logic: volumes are directories under the data
// dir with a tracked capacity, snapshots are copies, publications are records of which CSI node
// may use a volume. No gRPC transport here; the server adapter calls these methods.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/status.h>

#include "csi/v1/csi.pb.h"
#include "plugins/hostpath/volume_store.hpp"

namespace mooring::hostpath {

struct ControllerConfig {
  std::filesystem::path data_dir;
  std::string own_node_id;               // in monolith mode this node is always known
  std::vector<std::string> known_nodes;  // "*" = any node id
  std::int64_t capacity_bytes = 0;       // 0 = free space of the data dir
  std::int64_t max_volume_size = 0;
  std::int64_t default_volume_size = 1LL << 30;
  bool node_expansion_required = false;
  std::map<std::string, std::string> topology;  // of this plugin instance
  bool modify_volume = true;                    // MODIFY_VOLUME (options.hpp)
};

class Controller {
 public:
  Controller(ControllerConfig config, VolumeStore& store) : config_(std::move(config)), store_(store) {}

  grpc::Status create_volume(const csi::v1::CreateVolumeRequest& req, csi::v1::CreateVolumeResponse& resp);
  grpc::Status delete_volume(const csi::v1::DeleteVolumeRequest& req);
  // Publications (publications.cpp).
  grpc::Status publish(const csi::v1::ControllerPublishVolumeRequest& req,
                       csi::v1::ControllerPublishVolumeResponse& resp);
  grpc::Status unpublish(const csi::v1::ControllerUnpublishVolumeRequest& req);
  grpc::Status validate_capabilities(const csi::v1::ValidateVolumeCapabilitiesRequest& req,
                                     csi::v1::ValidateVolumeCapabilitiesResponse& resp);
  grpc::Status list_volumes(const csi::v1::ListVolumesRequest& req, csi::v1::ListVolumesResponse& resp);
  grpc::Status get_capacity(const csi::v1::GetCapacityRequest& req, csi::v1::GetCapacityResponse& resp);
  grpc::Status get_capabilities(csi::v1::ControllerGetCapabilitiesResponse& resp);
  // Snapshots (snapshots.cpp).
  grpc::Status create_snapshot(const csi::v1::CreateSnapshotRequest& req, csi::v1::CreateSnapshotResponse& resp);
  grpc::Status delete_snapshot(const csi::v1::DeleteSnapshotRequest& req);
  grpc::Status list_snapshots(const csi::v1::ListSnapshotsRequest& req, csi::v1::ListSnapshotsResponse& resp);
  grpc::Status expand_volume(const csi::v1::ControllerExpandVolumeRequest& req,
                             csi::v1::ControllerExpandVolumeResponse& resp);
  grpc::Status get_volume(const csi::v1::ControllerGetVolumeRequest& req, csi::v1::ControllerGetVolumeResponse& resp);
  // CSI 1.12 (modify.cpp): the mutable parameters this plugin honours, and one snapshot by id.
  grpc::Status modify_volume(const csi::v1::ControllerModifyVolumeRequest& req);
  grpc::Status get_snapshot(const csi::v1::GetSnapshotRequest& req, csi::v1::GetSnapshotResponse& resp);

  // GroupController (group_snapshots.cpp): served beside the Controller service.
  grpc::Status group_capabilities(csi::v1::GroupControllerGetCapabilitiesResponse& resp);
  grpc::Status create_group_snapshot(const csi::v1::CreateVolumeGroupSnapshotRequest& req,
                                     csi::v1::CreateVolumeGroupSnapshotResponse& resp);
  grpc::Status delete_group_snapshot(const csi::v1::DeleteVolumeGroupSnapshotRequest& req);
  grpc::Status get_group_snapshot(const csi::v1::GetVolumeGroupSnapshotRequest& req,
                                  csi::v1::GetVolumeGroupSnapshotResponse& resp);

 private:
  std::int64_t available_bytes(const StoreState& state) const;

  ControllerConfig config_;
  VolumeStore& store_;
};

// Shared by the controller's files (publications.cpp, snapshots.cpp, group_snapshots.cpp): an
// INVALID_ARGUMENT status, a random id with a prefix ("snap-…"), the wall clock in ns, and a
// snapshot record as CSI shows it.
grpc::Status invalid(std::string msg);
std::string random_id(std::string_view prefix);
std::int64_t now_ns();
void fill_snapshot(const SnapshotRecord& s, csi::v1::Snapshot& out);

// The mutable parameters this plugin honours (modify.cpp): "tier" (standard, fast or archive) and
// "iops" (1..1000000). INVALID_ARGUMENT naming the first other key or bad value, and for any
// mutable parameter when MODIFY_VOLUME is off; OK for none.
grpc::Status check_mutable(const google::protobuf::Map<std::string, std::string>& params, bool modify_volume);

// Pagination tokens are opaque to callers: "after:<id>" resumes after that id, so entries added
// or deleted between pages neither repeat nor vanish. Anything else is a bad token (ABORTED).
std::string make_page_token(const std::string& last_id);
bool parse_page_token(const std::string& token, std::string& after_id);
// One page of `ids` (sorted): `fill` runs for each entry on it; next_token resumes after it.
grpc::Status paginate(const std::vector<std::string>& ids, std::int32_t max_entries, const std::string& token,
                      std::string& next_token, const std::function<void(const std::string&)>& fill);

}  // namespace mooring::hostpath
