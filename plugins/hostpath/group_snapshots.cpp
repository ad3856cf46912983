// mooring-hostpath: the CSI GroupController service: a snapshot of several volumes taken
// together. Each member is a normal snapshot record (usable as a CreateVolume content source)
// that also carries its group's id and name; the group is the set of members with that id.
//
// Consistency. The whole group is one catalogue transaction: it runs under the store's lock (an
// in-process mutex plus an flock on the data dir), which every controller operation on every
// volume takes. So while the members are copied no CreateVolume, DeleteVolume, expansion,
// snapshot or publish of any member can interleave, all members carry one creation time, and a
// crash or a failed copy leaves no member behind (the records are written only when every copy
// is done, and the copies made so far are removed). What the lock cannot stop is a task writing
// through a bind mount of a published member: hostpath has no block layer to freeze, so a write
// that lands while the copy runs may appear in a later member's copy and not in an earlier one's.
// The group is a point-in-time copy when no member is being written (stop or pause the writers,
// as for any crash-consistent backup); with writers it is as consistent as copying the
// directories one after the other inside one short critical section.
#include <algorithm>
#include <set>

#include "plugins/hostpath/controller.hpp"
#include "plugins/hostpath/volume_content.hpp"
#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

using grpc::Status;
using grpc::StatusCode;
namespace fs = std::filesystem;

const log::Logger kLog{"group-controller"};

// The members of a group, by snapshot id (sorted).
std::vector<const SnapshotRecord*> members_of(const StoreState& state, const std::string& group_id) {
  std::vector<const SnapshotRecord*> out;
  for (const auto& [id, s] : state.snapshots)
    if (s.group_snapshot_id == group_id) out.push_back(&s);
  return out;
}

void fill_group(const std::vector<const SnapshotRecord*>& members, csi::v1::VolumeGroupSnapshot& out) {
  if (members.empty()) return;
  out.set_group_snapshot_id(members.front()->group_snapshot_id);
  for (const auto* s : members) fill_snapshot(*s, *out.add_snapshots());
  out.mutable_creation_time()->set_seconds(members.front()->created_unix_ns / 1000000000);
  out.mutable_creation_time()->set_nanos(static_cast<int>(members.front()->created_unix_ns % 1000000000));
  out.set_ready_to_use(true);  // copies are complete when the call returns
}

std::string joined(const std::set<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ", ") + id;
  return out;
}

// The spec: snapshot_ids must name exactly the group's members (INVALID_ARGUMENT otherwise).
Status check_members(const std::vector<const SnapshotRecord*>& members,
                     const google::protobuf::RepeatedPtrField<std::string>& asked, const std::string& group_id) {
  std::set<std::string> have, want(asked.begin(), asked.end());
  for (const auto* s : members) have.insert(s->id);
  if (have == want) return Status::OK;
  return invalid("snapshot_ids [" + joined(want) + "] do not match group snapshot " + group_id +
                 ", whose members are [" + joined(have) + "]");
}

}  // namespace

Status Controller::group_capabilities(csi::v1::GroupControllerGetCapabilitiesResponse& resp) {
  resp.add_capabilities()->mutable_rpc()->set_type(
      csi::v1::GroupControllerServiceCapability::RPC::CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT);
  return Status::OK;
}

Status Controller::create_group_snapshot(const csi::v1::CreateVolumeGroupSnapshotRequest& req,
                                         csi::v1::CreateVolumeGroupSnapshotResponse& resp) {
  if (req.name().empty()) return invalid("name is required");
  if (req.source_volume_ids().empty()) return invalid("source_volume_ids is required");
  std::set<std::string> sources;
  for (const auto& id : req.source_volume_ids()) {
    if (id.empty()) return invalid("source_volume_ids: an empty volume id");
    if (!sources.insert(id).second) return invalid("source_volume_ids: volume " + id + " is named twice");
  }
  std::vector<std::string> copied;  // member directories made so far, removed if the group fails
  auto st = store_.transact([&](StoreTxn& txn) -> Status {
    const StoreState& state = txn.state();
    // Idempotent by name: the same sources again answer the same group.
    for (const auto& [id, s] : state.snapshots) {
      if (s.group_snapshot_id.empty() || s.group_name != req.name()) continue;
      auto members = members_of(state, s.group_snapshot_id);
      std::set<std::string> had;
      for (const auto* m : members) had.insert(m->source_volume_id);
      if (had != sources) {
        return {StatusCode::ALREADY_EXISTS, "group snapshot named '" + req.name() + "' exists as " +
                                                s.group_snapshot_id + " of volumes [" + joined(had) + "], not [" +
                                                joined(sources) + "]"};
      }
      fill_group(members, *resp.mutable_group_snapshot());
      return Status::OK;
    }
    for (const auto& id : sources) {
      if (!state.volumes.contains(id)) return {StatusCode::NOT_FOUND, "source volume " + id + " not found"};
    }
    const std::string group_id = random_id("group-");
    const std::int64_t taken = now_ns();  // one point in time for every member
    std::vector<SnapshotRecord> made;
    for (const auto& id : sources) {
      const VolumeRecord& vol = state.volumes.at(id);
      SnapshotRecord s;
      s.id = random_id("snap-");
      s.source_volume_id = id;
      s.size_bytes = vol.capacity_bytes;
      s.path = (store_.snapshots_dir() / s.id).string();
      s.created_unix_ns = taken;
      s.group_snapshot_id = group_id;
      s.group_name = req.name();
      if (auto copy = copy_tree(vol.path, s.path); !copy.ok()) return copy;
      copied.push_back(s.path);
      made.push_back(std::move(s));
    }
    for (auto& s : made) txn.put_snapshot(std::move(s));
    fill_group(members_of(txn.state(), group_id), *resp.mutable_group_snapshot());
    return Status::OK;
  });
  if (!st.ok()) {
    std::error_code ec;
    for (const auto& path : copied) fs::remove_all(path, ec);
    return st;
  }
  if (!copied.empty())
    kLog.info("group snapshot created", {{"group_snapshot_id", resp.group_snapshot().group_snapshot_id()},
                                         {"name", req.name()},
                                         {"members", static_cast<std::int64_t>(copied.size())}});
  return st;
}

Status Controller::delete_group_snapshot(const csi::v1::DeleteVolumeGroupSnapshotRequest& req) {
  if (req.group_snapshot_id().empty()) return invalid("group_snapshot_id is required");
  std::vector<std::string> paths;
  auto st = store_.transact([&](StoreTxn& txn) -> Status {
    auto members = members_of(txn.state(), req.group_snapshot_id());
    if (members.empty()) return Status::OK;  // already gone
    if (auto bad = check_members(members, req.snapshot_ids(), req.group_snapshot_id()); !bad.ok()) return bad;
    std::vector<std::string> ids;
    for (const auto* s : members) {
      ids.push_back(s->id);
      paths.push_back(s->path);
    }
    for (const auto& id : ids) txn.erase_snapshot(id);
    return Status::OK;
  });
  // The records are gone first: a crash here leaves orphan directories, never a member without one.
  if (st.ok() && !paths.empty()) {
    std::error_code ec;
    for (const auto& path : paths) fs::remove_all(path, ec);
    kLog.info("group snapshot deleted", {{"group_snapshot_id", req.group_snapshot_id()}});
  }
  return st;
}

Status Controller::get_group_snapshot(const csi::v1::GetVolumeGroupSnapshotRequest& req,
                                      csi::v1::GetVolumeGroupSnapshotResponse& resp) {
  if (req.group_snapshot_id().empty()) return invalid("group_snapshot_id is required");
  return store_.read([&](const StoreState& state) -> Status {
    auto members = members_of(state, req.group_snapshot_id());
    if (members.empty()) return {StatusCode::NOT_FOUND, "group snapshot " + req.group_snapshot_id() + " not found"};
    if (auto bad = check_members(members, req.snapshot_ids(), req.group_snapshot_id()); !bad.ok()) return bad;
    fill_group(members, *resp.mutable_group_snapshot());
    return Status::OK;
  });
}

}  // namespace mooring::hostpath
