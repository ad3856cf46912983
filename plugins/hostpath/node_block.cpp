// mooring-hostpath: the block half of the Node service. A block volume's backing file is attached
// to a loop device at NodeStageVolume (nothing is mounted at the staging path: the CSI spec lets a
// plugin stage without one) and the device node is bind-mounted onto a file at the target path at
// NodePublishVolume. Records are written before a device is attached and removed after it is
// detached, so a restarted plugin knows every device it made.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "plugins/hostpath/loop_device.hpp"
#include "plugins/hostpath/mount_table.hpp"
#include "plugins/hostpath/node.hpp"
#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

using grpc::Status;
using grpc::StatusCode;
namespace fs = std::filesystem;

const log::Logger kLog{"node"};

// A device a record names (a staging path's, or a read-only publish's own).
bool named_by(const NodeRecord& rec, const std::string& device) {
  for (const auto& [path, s] : rec.staged)
    if (s.device == device) return true;
  for (const auto& [path, p] : rec.published)
    if (p.device == device) return true;
  return false;
}

Status attach_error(const fs::path& image, const std::string& error) {
  // No loop devices on this node is a missing dependency, not a passing failure.
  if (auto why = check_loop_support(); !why.empty())
    return {StatusCode::FAILED_PRECONDITION, "cannot attach " + image.string() + " to a loop device: " + why +
                                                 " (block volumes need loop devices on the node)"};
  return {StatusCode::INTERNAL, "cannot attach " + image.string() + " to a loop device: " + error};
}

}  // namespace

bool device_attached(const StagedVolume& staged) {
  return staged.block && !staged.device.empty() && loop_backed_by(staged.device, staged.source);
}

Status Node::stage_block(const std::string& volume_id, const fs::path& image, const std::string& staging,
                         bool readonly) {
  // The intent first: a device attached by a crashed call is found by its backing file at unstage.
  StagedVolume staged{volume_id, image.string(), readonly, true, ""};
  if (!state_.put_staged(staging, staged)) return {StatusCode::INTERNAL, "cannot persist node state"};
  std::string error;
  staged.device = attach_loop(image, readonly, error);
  if (staged.device.empty()) {
    state_.erase_staged(staging);
    return attach_error(image, error);
  }
  if (!state_.put_staged(staging, staged)) {
    detach_loop(staged.device);
    state_.erase_staged(staging);
    return {StatusCode::INTERNAL, "cannot persist node state"};
  }
  kLog.info("block volume staged",
            {{"volume_id", volume_id}, {"staging_path", staging}, {"device", staged.device}, {"readonly", readonly}});
  return Status::OK;
}

Status Node::publish_block(const std::string& volume_id, const StagedVolume& staged, const std::string& staging,
                           const std::string& target, bool readonly, int mode) {
  // For a block volume the plugin places the device at target_path itself (the CO made the
  // parent): an empty file the device node is bind-mounted onto.
  std::error_code ec;
  if (fs::is_directory(target, ec)) {
    if (!fs::is_empty(target, ec) || !fs::remove(target, ec))
      return {StatusCode::ALREADY_EXISTS,
              "target path " + target + " is a directory; a block volume is published as a file"};
  }
  if (const int fd = ::open(target.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600); fd >= 0) {
    ::close(fd);
  } else {
    return {StatusCode::INTERNAL, "cannot create target file " + target + ": " + std::strerror(errno)};
  }
  PublishedVolume published{volume_id, staging, readonly, mode, true, ""};
  if (!state_.put_published(target, published)) return {StatusCode::INTERNAL, "cannot persist node state"};
  auto undo = [&] {
    if (!published.device.empty()) detach_loop(published.device);
    state_.erase_published(target);
    fs::remove(target, ec);
  };
  std::string device = staged.device;
  if (readonly && !staged.readonly) {
    // A read-only bind mount does not stop writes through a device node; a read-only loop device does.
    std::string error;
    published.device = attach_loop(staged.source, true, error);
    if (published.device.empty()) {
      undo();
      return attach_error(staged.source, error);
    }
    if (!state_.put_published(target, published)) {
      undo();
      return {StatusCode::INTERNAL, "cannot persist node state"};
    }
    device = published.device;
  }
  if (auto mec = bind_mount(device, target, readonly)) {
    undo();
    return {StatusCode::INTERNAL, "bind-mount " + device + " on " + target + ": " + mec.message()};
  }
  kLog.info("block volume published",
            {{"volume_id", volume_id}, {"target_path", target}, {"device", device}, {"readonly", readonly}});
  return Status::OK;
}

Status Node::unpublish_block(const PublishedVolume& published, const std::string& target) {
  // Its own read-only device, when the record names one that is still a volume's image.
  if (!published.device.empty() && loop_backing_file(published.device).ends_with(std::string("/") + kBlockImage)) {
    if (auto ec = detach_loop(published.device))
      return {StatusCode::INTERNAL, "cannot detach " + published.device + ": " + ec.message()};
  }
  std::error_code ec;
  if (fs::is_regular_file(target, ec) && fs::file_size(target, ec) == 0) fs::remove(target, ec);
  return Status::OK;
}

Status Node::unstage_block(const StagedVolume& staged, const NodeRecord& rec) {
  if (device_attached(staged)) {
    if (auto ec = detach_loop(staged.device))
      return {StatusCode::INTERNAL, "cannot detach " + staged.device + ": " + ec.message()};
  }
  // A crash between attaching and recording leaves a device of this image no record names.
  for (const auto& device : loops_backed_by(staged.source)) {
    if (named_by(rec, device)) continue;
    kLog.warn("detaching a loop device no record names", {{"device", device}, {"image", staged.source}});
    if (auto ec = detach_loop(device)) return {StatusCode::INTERNAL, "cannot detach " + device + ": " + ec.message()};
  }
  kLog.info("block volume unstaged", {{"volume_id", staged.volume_id}, {"device", staged.device}});
  return Status::OK;
}

void Node::block_stats(const StagedVolume& staged, const std::string& device,
                       csi::v1::NodeGetVolumeStatsResponse& resp) {
  std::error_code ec;
  const auto size = fs::file_size(staged.source, ec);
  // A block device has no files: its size only (the spec lets used and available be omitted).
  auto* bytes = resp.add_usage();
  bytes->set_unit(csi::v1::VolumeUsage::BYTES);
  bytes->set_total(ec ? 0 : static_cast<std::int64_t>(size));
  auto* cond = resp.mutable_volume_condition();
  const bool attached = loop_backed_by(device, staged.source);
  cond->set_abnormal(!attached);
  cond->set_message(attached ? "loop device " + device + " attached"
                             : "loop device " + device + " is no longer attached to " + staged.source);
}

Status Node::expand_block(const std::string& volume_id, csi::v1::NodeExpandVolumeResponse& resp) {
  const auto rec = state_.snapshot();
  std::string image;
  for (const auto& [path, s] : rec.staged) {
    if (s.volume_id != volume_id || !device_attached(s)) continue;
    image = s.source;
    if (auto ec = refresh_loop_capacity(s.device))
      return {StatusCode::INTERNAL, "cannot refresh the size of " + s.device + ": " + ec.message()};
  }
  for (const auto& [path, p] : rec.published) {
    if (p.volume_id == volume_id && !p.device.empty()) refresh_loop_capacity(p.device);
  }
  std::error_code ec;
  const auto size = image.empty() ? 0 : fs::file_size(image, ec);
  resp.set_capacity_bytes(ec ? 0 : static_cast<std::int64_t>(size));
  return Status::OK;
}

}  // namespace mooring::hostpath
