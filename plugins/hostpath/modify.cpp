// mooring-hostpath: CSI 1.12's ControllerModifyVolume and GetSnapshot. The plugin honours two
// mutable parameters, a tier label and an IOPS figure, recorded with the volume (state file, call
// log): a directory has neither, but the orchestrator's path through them is what tests need.
// INVALID_ARGUMENT leaves the volume as it was, as CSI 1.12 requires.
#include <charconv>
#include <string_view>

#include "plugins/hostpath/controller.hpp"
#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

using grpc::Status;
using grpc::StatusCode;

const log::Logger kLog{"controller"};

constexpr std::string_view kTiers[] = {"standard", "fast", "archive"};
constexpr std::int64_t kMaxIops = 1000000;

bool known_tier(std::string_view value) {
  for (auto t : kTiers)
    if (value == t) return true;
  return false;
}

bool iops_ok(std::string_view value) {
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  return ec == std::errc{} && ptr == value.data() + value.size() && n >= 1 && n <= kMaxIops;
}

}  // namespace

Status check_mutable(const google::protobuf::Map<std::string, std::string>& params, bool modify_volume) {
  if (params.empty()) return Status::OK;
  if (!modify_volume) return invalid("mutable_parameters given, but this plugin does not advertise MODIFY_VOLUME");
  for (const auto& [key, value] : params) {
    if (key == "tier" && !known_tier(value))
      return invalid("mutable parameter \"tier\": \"" + value + "\" is not one of standard, fast, archive");
    if (key == "iops" && !iops_ok(value))
      return invalid("mutable parameter \"iops\": \"" + value + "\" is not an integer from 1 to 1000000");
    if (key != "tier" && key != "iops")
      return invalid("mutable parameter \"" + key + "\" is not one this plugin can change (tier, iops)");
  }
  return Status::OK;
}

Status Controller::modify_volume(const csi::v1::ControllerModifyVolumeRequest& req) {
  if (!config_.modify_volume) return {StatusCode::UNIMPLEMENTED, "MODIFY_VOLUME is not advertised"};
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (req.mutable_parameters().empty()) return invalid("mutable_parameters is required");
  if (auto st = check_mutable(req.mutable_parameters(), true); !st.ok()) return st;
  return store_.transact([&](StoreTxn& txn) -> Status {
    auto it = txn.state().volumes.find(req.volume_id());
    if (it == txn.state().volumes.end()) return {StatusCode::NOT_FOUND, "volume " + req.volume_id() + " not found"};
    VolumeRecord v = it->second;
    for (const auto& [key, value] : req.mutable_parameters()) v.mutable_parameters[key] = value;
    if (v == it->second) return Status::OK;  // the same request again: nothing to write
    kLog.info("volume modified", {{"volume_id", v.id}, {"keys", req.mutable_parameters().size()}});
    txn.put_volume(std::move(v));
    return Status::OK;
  });
}

Status Controller::get_snapshot(const csi::v1::GetSnapshotRequest& req, csi::v1::GetSnapshotResponse& resp) {
  if (req.snapshot_id().empty()) return invalid("snapshot_id is required");
  return store_.read([&](const StoreState& state) -> Status {
    auto it = state.snapshots.find(req.snapshot_id());
    if (it == state.snapshots.end()) return {StatusCode::NOT_FOUND, "snapshot " + req.snapshot_id() + " not found"};
    fill_snapshot(it->second, *resp.mutable_snapshot());
    return Status::OK;
  });
}

}  // namespace mooring::hostpath
