// mooring-hostpath: the Controller's snapshots (CreateSnapshot, DeleteSnapshot, ListSnapshots).
// A snapshot is a copy of its source volume's directory under the data dir; a member of a group
// snapshot (group_snapshots.cpp) goes only with its group.
#include <filesystem>

#include "plugins/hostpath/controller.hpp"
#include "plugins/hostpath/volume_content.hpp"
#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

using grpc::Status;
using grpc::StatusCode;
namespace fs = std::filesystem;

const log::Logger kLog{"controller"};

}  // namespace

void fill_snapshot(const SnapshotRecord& s, csi::v1::Snapshot& out) {
  out.set_snapshot_id(s.id);
  out.set_source_volume_id(s.source_volume_id);
  out.set_size_bytes(s.size_bytes);
  out.set_ready_to_use(true);
  out.mutable_creation_time()->set_seconds(s.created_unix_ns / 1000000000);
  out.mutable_creation_time()->set_nanos(static_cast<int>(s.created_unix_ns % 1000000000));
  out.set_group_snapshot_id(s.group_snapshot_id);
}

Status Controller::create_snapshot(const csi::v1::CreateSnapshotRequest& req, csi::v1::CreateSnapshotResponse& resp) {
  if (req.name().empty()) return invalid("name is required");
  if (req.source_volume_id().empty()) return invalid("source_volume_id is required");
  return store_.transact([&](StoreTxn& txn) -> Status {
    const StoreState& state = txn.state();
    for (const auto& [id, s] : state.snapshots) {
      if (s.name != req.name()) continue;
      if (s.source_volume_id != req.source_volume_id()) {
        return {StatusCode::ALREADY_EXISTS, "snapshot named '" + req.name() + "' exists as " + id + " of volume " +
                                                s.source_volume_id + ", not " + req.source_volume_id()};
      }
      fill_snapshot(s, *resp.mutable_snapshot());
      return Status::OK;
    }
    auto vol = state.volumes.find(req.source_volume_id());
    if (vol == state.volumes.end()) {
      return {StatusCode::NOT_FOUND, "source volume " + req.source_volume_id() + " not found"};
    }
    SnapshotRecord s;
    s.id = random_id("snap-");
    s.name = req.name();
    s.source_volume_id = vol->first;
    s.size_bytes = vol->second.capacity_bytes;  // a restore needs a volume at least this large
    s.path = (store_.snapshots_dir() / s.id).string();
    s.created_unix_ns = now_ns();
    if (auto st = copy_tree(vol->second.path, s.path); !st.ok()) return st;
    fill_snapshot(s, *resp.mutable_snapshot());
    kLog.info("snapshot created", {{"snapshot_id", s.id}, {"volume_id", s.source_volume_id}});
    txn.put_snapshot(std::move(s));
    return Status::OK;
  });
}

Status Controller::delete_snapshot(const csi::v1::DeleteSnapshotRequest& req) {
  if (req.snapshot_id().empty()) return invalid("snapshot_id is required");
  std::string path;
  auto st = store_.transact([&](StoreTxn& txn) -> Status {
    const StoreState& state = txn.state();
    auto it = state.snapshots.find(req.snapshot_id());
    if (it == state.snapshots.end()) return Status::OK;
    if (!it->second.group_snapshot_id.empty()) {
      return {StatusCode::FAILED_PRECONDITION, "snapshot " + req.snapshot_id() + " belongs to group snapshot " +
                                                   it->second.group_snapshot_id +
                                                   "; it is deleted with its group (DeleteVolumeGroupSnapshot)"};
    }
    path = it->second.path;
    txn.erase_snapshot(req.snapshot_id());
    return Status::OK;
  });
  if (st.ok() && !path.empty()) {
    std::error_code ec;
    fs::remove_all(path, ec);
    kLog.info("snapshot deleted", {{"snapshot_id", req.snapshot_id()}});
  }
  return st;
}

Status Controller::list_snapshots(const csi::v1::ListSnapshotsRequest& req, csi::v1::ListSnapshotsResponse& resp) {
  return store_.read([&](const StoreState& state) -> Status {
    std::vector<std::string> ids;
    for (const auto& [id, s] : state.snapshots) {
      if (!req.snapshot_id().empty() && id != req.snapshot_id()) continue;
      if (!req.source_volume_id().empty() && s.source_volume_id != req.source_volume_id()) continue;
      ids.push_back(id);
    }
    std::string next;
    auto st = paginate(ids, req.max_entries(), req.starting_token(), next, [&](const std::string& id) {
      fill_snapshot(state.snapshots.at(id), *resp.add_entries()->mutable_snapshot());
    });
    if (st.ok()) resp.set_next_token(next);
    return st;
  });
}
}  // namespace mooring::hostpath
