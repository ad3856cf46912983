#include "plugins/hostpath/node.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <charconv>

#include "plugins/hostpath/loop_device.hpp"
#include "plugins/hostpath/mount_table.hpp"
#include "plugins/hostpath/options.hpp"
#include "plugins/hostpath/volume_capability.hpp"
#include "plugins/hostpath/volume_store.hpp"
#include "shared/log/log.hpp"
#include "shared/mounts/volume_group.hpp"

namespace mooring::hostpath {
namespace {

using grpc::Status;
using grpc::StatusCode;
namespace fs = std::filesystem;

const log::Logger kLog{"node"};

Status invalid(std::string msg) { return {StatusCode::INVALID_ARGUMENT, std::move(msg)}; }

Status mount_error(std::string_view what, const std::error_code& ec) {
  const auto code =
      ec.value() == EPERM || ec.value() == EACCES ? StatusCode::FAILED_PRECONDITION : StatusCode::INTERNAL;
  return {code, std::string(what) + ": " + ec.message() +
                    (code == StatusCode::FAILED_PRECONDITION ? " (the node plugin needs root / CAP_SYS_ADMIN)" : "")};
}

Status check_path(const std::string& p, std::string_view field) {
  if (p.empty()) return invalid(std::string(field) + " is required");
  if (p.front() != '/') return invalid(std::string(field) + " must be an absolute path, got '" + p + "'");
  return Status::OK;
}

std::int64_t used_bytes(const fs::path& dir) {
  std::int64_t sum = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fec;
    if (it->is_regular_file(fec) && !it->is_symlink(fec)) sum += static_cast<std::int64_t>(it->file_size(fec));
  }
  return sum;
}

}  // namespace

// VOLUME_MOUNT_GROUP: a writable directory volume's files get the group the orchestrator names
// (group read-write, setgid directories), so a task of that group writes it without root. Read-only
// volumes are left as they are. `group` is what the request named ("" when none), for the log.
Status Node::give_mount_group(const csi::v1::VolumeCapability& cap, const fs::path& dir, bool readonly,
                              std::string& group) const {
  group = cap.has_mount() ? cap.mount().volume_mount_group() : std::string();
  if (group.empty()) return Status::OK;
  if (!config_.volume_mount_group)
    return invalid(
        "volume_capability.mount.volume_mount_group is set, but this plugin does not advertise VOLUME_MOUNT_GROUP");
  gid_t gid = 0;
  const auto [end, ec] = std::from_chars(group.data(), group.data() + group.size(), gid);
  if (ec != std::errc{} || end != group.data() + group.size())
    return invalid("volume_capability.mount.volume_mount_group must be a numeric group id, got '" + group + "'");
  if (readonly) return Status::OK;
  const auto changed = mounts::give_tree_to_group(dir, gid, /*always=*/false);
  if (!changed.error.empty()) return {StatusCode::INTERNAL, "volume_mount_group " + group + ": " + changed.error};
  if (changed.walked)
    kLog.info("volume given its mount group", {{"path", dir.string()}, {"volume_mount_group", group}});
  return Status::OK;
}

PathLocks::Guard PathLocks::lock(std::vector<std::string> paths) {
  std::unique_lock lock(mu_);
  released_.wait(lock, [&] {
    return std::none_of(paths.begin(), paths.end(), [&](const std::string& p) { return held_.contains(p); });
  });
  held_.insert(paths.begin(), paths.end());
  return Guard(*this, std::move(paths));
}

PathLocks::Guard::~Guard() {
  {
    std::lock_guard lock(owner_.mu_);
    for (const auto& p : paths_) owner_.held_.erase(p);
  }
  owner_.released_.notify_all();
}

Status Node::volume_source(const std::string& volume_id, const google::protobuf::Map<std::string, std::string>& ctx,
                           fs::path& out) const {
  // Volume ids are opaque to the orchestrator: one this plugin could never have made names no
  // volume of it ("volume does not exist"), which also keeps it from becoming a path.
  if (!is_safe_id(volume_id))
    return {StatusCode::NOT_FOUND, "volume '" + volume_id + "' not found (not a hostpath volume id)"};
  if (auto it = ctx.find("path"); it != ctx.end() && !it->second.empty()) {
    const fs::path p(it->second);
    if (!p.is_absolute() || p.lexically_normal() != p || p.filename() != volume_id) {
      return invalid("volume_context path '" + it->second +
                     "' must be an absolute, normal path ending in the volume id");
    }
    out = p;
  } else {
    out = config_.data_dir / "volumes" / volume_id;
  }
  std::error_code ec;
  if (!fs::is_directory(out, ec))
    return {StatusCode::NOT_FOUND, "volume " + volume_id + " not found (no directory " + out.string() + ")"};
  return Status::OK;
}

bool Node::volume_known(const std::string& volume_id) const {
  fs::path dir;
  if (volume_source(volume_id, {}, dir).ok()) return true;
  bool in_catalogue = false;
  store_.read([&](const StoreState& catalogue) {
    in_catalogue = catalogue.volumes.contains(volume_id);
    return Status::OK;
  });
  return in_catalogue;
}

Status Node::stage(const csi::v1::NodeStageVolumeRequest& req) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (auto st = check_path(req.staging_target_path(), "staging_target_path"); !st.ok()) return st;
  if (!req.has_volume_capability()) return invalid("volume_capability is required");
  if (auto st = check_capability(req.volume_capability(), "volume_capability"); !st.ok()) return st;
  fs::path source;
  if (auto st = volume_source(req.volume_id(), req.volume_context(), source); !st.ok()) return st;
  const bool block = is_block_volume(source);
  if (auto why = access_type_mismatch(req.volume_capability(), req.volume_id(), block); !why.empty())
    return {StatusCode::FAILED_PRECONDITION, "volume_capability: " + why};
  const std::string staging = canonical_mount_path(req.staging_target_path());
  const bool readonly = is_reader_only_mode(req.volume_capability().access_mode().mode());

  const auto guard = paths_.lock({staging});
  const auto rec = state_.snapshot();
  if (auto it = rec.staged.find(staging); it != rec.staged.end()) {
    if (it->second.volume_id != req.volume_id()) {
      return {StatusCode::ALREADY_EXISTS, "staging path " + staging + " already holds volume " + it->second.volume_id};
    }
    if (it->second.readonly != readonly) {
      return {StatusCode::ALREADY_EXISTS, "volume " + req.volume_id() + " is already staged at " + staging +
                                              " with a different access mode (read-only vs read-write)"};
    }
    // Already staged (a block volume whose device went away, after a reboot, is attached again).
    if (block ? device_attached(it->second) : config_.stage_without_mount || is_mount_point(staging)) return Status::OK;
  } else if (is_mount_point(staging)) {
    return {StatusCode::ALREADY_EXISTS,
            "staging path " + staging + " is already a mount point not made by this plugin"};
  }
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) return {StatusCode::INTERNAL, "cannot create staging path " + staging + ": " + ec.message()};
  if (block) return stage_block(req.volume_id(), source / kBlockImage, staging, readonly);
  std::string group;
  if (auto st = give_mount_group(req.volume_capability(), source, readonly, group); !st.ok()) return st;
  // Record the intent first: after a crash a record without a mount is harmless (re-staged or
  // dropped on unstage), a mount without a record would be unknown to us.
  if (!state_.put_staged(staging, {req.volume_id(), source.string(), readonly})) {
    return {StatusCode::INTERNAL, "cannot persist node state"};
  }
  if (config_.stage_without_mount) {
    kLog.info("volume staged (recorded, nothing mounted)",
              {{"volume_id", req.volume_id()}, {"staging_path", staging}, {"volume_mount_group", group}});
    return Status::OK;
  }
  if (auto mec = bind_mount(source, staging, readonly)) {
    state_.erase_staged(staging);
    return mount_error("bind-mount " + source.string() + " on " + staging, mec);
  }
  kLog.info("volume staged", {{"volume_id", req.volume_id()},
                              {"staging_path", staging},
                              {"readonly", readonly},
                              {"volume_mount_group", group}});
  return Status::OK;
}

Status Node::unstage(const csi::v1::NodeUnstageVolumeRequest& req) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (auto st = check_path(req.staging_target_path(), "staging_target_path"); !st.ok()) return st;
  const std::string staging = canonical_mount_path(req.staging_target_path());

  const auto guard = paths_.lock({staging});
  const auto rec = state_.snapshot();
  const auto staged = rec.staged.find(staging);
  if (staged != rec.staged.end() && staged->second.volume_id != req.volume_id()) {
    return {StatusCode::FAILED_PRECONDITION,
            "staging path " + staging + " holds volume " + staged->second.volume_id + ", not " + req.volume_id()};
  }
  // Not staged here is OK (idempotent); a volume this plugin does not have at all is NOT_FOUND.
  if (staged == rec.staged.end() && !is_mount_point(staging) && !volume_known(req.volume_id())) {
    return {StatusCode::NOT_FOUND, "volume " + req.volume_id() + " not found (not staged at " + staging +
                                       ", and this plugin has no such volume)"};
  }
  for (const auto& [target, p] : rec.published) {
    if (p.staging_path == staging && is_mount_point(target)) {
      return {StatusCode::FAILED_PRECONDITION,
              "volume " + req.volume_id() + " is still published at " + target + "; unpublish it first"};
    }
  }
  if (auto ec = unmount_all(staging)) return mount_error("unmount " + staging, ec);
  if (staged != rec.staged.end() && staged->second.block) {
    if (auto st = unstage_block(staged->second, rec); !st.ok()) return st;
  }
  if (!state_.erase_staged(staging)) return {StatusCode::INTERNAL, "cannot persist node state"};
  kLog.info("volume unstaged", {{"volume_id", req.volume_id()}, {"staging_path", staging}});
  return Status::OK;
}

Status Node::publish(const csi::v1::NodePublishVolumeRequest& req) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (auto st = check_path(req.target_path(), "target_path"); !st.ok()) return st;
  if (!req.has_volume_capability()) return invalid("volume_capability is required");
  if (auto st = check_capability(req.volume_capability(), "volume_capability"); !st.ok()) return st;
  if (req.staging_target_path().empty()) {
    return {StatusCode::FAILED_PRECONDITION,
            "staging_target_path is not set, but this plugin has STAGE_UNSTAGE_VOLUME: call NodeStageVolume first"};
  }
  if (auto st = check_path(req.staging_target_path(), "staging_target_path"); !st.ok()) return st;
  const std::string staging = canonical_mount_path(req.staging_target_path());
  const std::string target = canonical_mount_path(req.target_path());
  const bool readonly = wants_read_only(req.volume_capability(), req.readonly());

  const auto guard = paths_.lock(staging == target ? std::vector<std::string>{target} : std::vector{staging, target});
  const auto rec = state_.snapshot();
  auto staged = rec.staged.find(staging);
  const auto is_staged = [&](const StagedVolume& s) {
    return s.block ? device_attached(s) : config_.stage_without_mount || is_mount_point(staging);
  };
  if (staged == rec.staged.end() || staged->second.volume_id != req.volume_id() || !is_staged(staged->second)) {
    // Not staged here: maybe the volume does not exist at all.
    fs::path source;
    if (auto st = volume_source(req.volume_id(), req.volume_context(), source); !st.ok()) return st;
    return {StatusCode::FAILED_PRECONDITION,
            "volume " + req.volume_id() + " is not staged at " + staging + "; call NodeStageVolume first"};
  }
  if (auto why = access_type_mismatch(req.volume_capability(), req.volume_id(), staged->second.block); !why.empty())
    return {StatusCode::FAILED_PRECONDITION, "volume_capability: " + why};
  const int mode = req.volume_capability().access_mode().mode();
  if (auto other = published_elsewhere(rec, req.volume_id(), target, mode); !other.empty()) {
    return {StatusCode::FAILED_PRECONDITION, "volume " + req.volume_id() + " is already published at " + other +
                                                 " and SINGLE_NODE_SINGLE_WRITER allows one target path"};
  }
  if (auto it = rec.published.find(target); it != rec.published.end()) {
    if (it->second.volume_id != req.volume_id()) {
      return {StatusCode::ALREADY_EXISTS, "target path " + target + " already holds volume " + it->second.volume_id};
    }
    if (it->second.readonly != readonly) {
      return {StatusCode::ALREADY_EXISTS,
              "volume " + req.volume_id() + " is already published at " + target + " with a different readonly flag"};
    }
    if (is_mount_point(target)) return Status::OK;  // already published
  } else if (is_mount_point(target)) {
    return {StatusCode::ALREADY_EXISTS, "target path " + target + " is already a mount point not made by this plugin"};
  }
  if (staged->second.block) return publish_block(req.volume_id(), staged->second, staging, target, readonly, mode);
  // Staged by an orchestrator that did not name the group then (or before a restart): given here.
  std::string group;
  if (auto st = give_mount_group(req.volume_capability(), staged->second.source, readonly, group); !st.ok()) return st;
  std::error_code ec;
  fs::create_directories(target, ec);  // creating target_path is the plugin's job (CSI spec)
  if (ec) return {StatusCode::INTERNAL, "cannot create target path " + target + ": " + ec.message()};
  if (!state_.put_published(target, {req.volume_id(), staging, readonly, mode})) {
    return {StatusCode::INTERNAL, "cannot persist node state"};
  }
  // Staged without a mount, the volume directory itself is what the target shows.
  const std::string source = config_.stage_without_mount ? staged->second.source : staging;
  if (auto mec = bind_mount(source, target, readonly)) {
    state_.erase_published(target);
    return mount_error("bind-mount " + source + " on " + target, mec);
  }
  kLog.info(
      "volume published",
      {{"volume_id", req.volume_id()}, {"target_path", target}, {"readonly", readonly}, {"volume_mount_group", group}});
  return Status::OK;
}

Status Node::unpublish(const csi::v1::NodeUnpublishVolumeRequest& req) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (auto st = check_path(req.target_path(), "target_path"); !st.ok()) return st;
  const std::string target = canonical_mount_path(req.target_path());

  const auto guard = paths_.lock({target});
  const auto rec = state_.snapshot();
  const auto published = rec.published.find(target);
  if (published != rec.published.end() && published->second.volume_id != req.volume_id()) {
    return {StatusCode::FAILED_PRECONDITION,
            "target path " + target + " holds volume " + published->second.volume_id + ", not " + req.volume_id()};
  }
  // Not published here is OK (idempotent); a volume this plugin does not have at all is NOT_FOUND.
  if (published == rec.published.end() && !is_mount_point(target) && !volume_known(req.volume_id())) {
    return {StatusCode::NOT_FOUND, "volume " + req.volume_id() + " not found (not published at " + target +
                                       ", and this plugin has no such volume)"};
  }
  if (auto ec = unmount_all(target)) return mount_error("unmount " + target, ec);
  if (published != rec.published.end() && published->second.block) {
    if (auto st = unpublish_block(published->second, target); !st.ok()) return st;
  }
  std::error_code ec;
  // The plugin created the target directory, so it removes it; only when empty (never a
  // recursive delete of what might still be someone's data).
  if (fs::is_directory(target, ec) && fs::is_empty(target, ec)) fs::remove(target, ec);
  if (!state_.erase_published(target)) return {StatusCode::INTERNAL, "cannot persist node state"};
  kLog.info("volume unpublished", {{"volume_id", req.volume_id()}, {"target_path", target}});
  return Status::OK;
}

Status Node::volume_stats(const csi::v1::NodeGetVolumeStatsRequest& req, csi::v1::NodeGetVolumeStatsResponse& resp) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (req.volume_path().empty()) return invalid("volume_path is required");
  std::string path;
  if (auto st = find_volume_path(req.volume_id(), req.volume_path(), path); !st.ok()) return st;
  const auto rec = state_.snapshot();
  // A block volume: its backing file and the device the path shows.
  const auto published = rec.published.find(path);
  const auto staged = rec.staged.find(published != rec.published.end() ? published->second.staging_path : path);
  if (staged != rec.staged.end() && staged->second.block) {
    const bool own = published != rec.published.end() && !published->second.device.empty();
    block_stats(staged->second, own ? published->second.device : staged->second.device, resp);
    return Status::OK;
  }
  // A staging path this plugin mounted nothing at: the volume directory is what it measures.
  const bool unmounted_stage =
      config_.stage_without_mount && published == rec.published.end() && staged != rec.staged.end();
  const std::string measured = unmounted_stage ? staged->second.source : path;
  struct statvfs st {};
  if (::statvfs(measured.c_str(), &st) != 0) return {StatusCode::INTERNAL, "statvfs " + measured + " failed"};
  const std::int64_t used = used_bytes(measured);
  std::int64_t total = static_cast<std::int64_t>(st.f_blocks) * static_cast<std::int64_t>(st.f_frsize);
  store_.read([&](const StoreState& catalogue) {
    if (auto it = catalogue.volumes.find(req.volume_id()); it != catalogue.volumes.end())
      total = it->second.capacity_bytes;
    return Status::OK;
  });  // unreadable: the filesystem's size stands
  auto* bytes = resp.add_usage();
  bytes->set_unit(csi::v1::VolumeUsage::BYTES);
  bytes->set_total(total);
  bytes->set_used(used);
  bytes->set_available(std::max<std::int64_t>(0, total - used));
  auto* inodes = resp.add_usage();
  inodes->set_unit(csi::v1::VolumeUsage::INODES);
  inodes->set_total(static_cast<std::int64_t>(st.f_files));
  inodes->set_available(static_cast<std::int64_t>(st.f_ffree));
  inodes->set_used(static_cast<std::int64_t>(st.f_files - st.f_ffree));
  auto* cond = resp.mutable_volume_condition();
  if (unmounted_stage) {
    std::error_code ec;
    const bool present = fs::is_directory(measured, ec);
    cond->set_abnormal(!present);
    cond->set_message(present ? "staged (nothing mounted at the staging path)"
                              : "volume directory " + measured + " is missing");
  } else if (!is_mount_point(path)) {
    cond->set_abnormal(true);
    cond->set_message(path + " is no longer a mount point");
  } else {
    cond->set_abnormal(false);
    cond->set_message("mounted");
  }
  return Status::OK;
}

Status Node::expand(const csi::v1::NodeExpandVolumeRequest& req, csi::v1::NodeExpandVolumeResponse& resp) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (req.volume_path().empty()) return invalid("volume_path is required");
  if (req.has_volume_capability()) {
    if (auto st = check_capability(req.volume_capability(), "volume_capability"); !st.ok()) return st;
  }
  const auto& range = req.capacity_range();
  if (range.required_bytes() < 0 || range.limit_bytes() < 0)
    return invalid("capacity_range: sizes must not be negative");
  if (range.limit_bytes() > 0 && range.required_bytes() > range.limit_bytes()) {
    return invalid("capacity_range: required_bytes exceeds limit_bytes");
  }
  std::string path;
  if (auto st = find_volume_path(req.volume_id(), req.volume_path(), path); !st.ok()) return st;
  const auto rec = state_.snapshot();
  const auto published = rec.published.find(path);
  const auto staged = rec.staged.find(published != rec.published.end() ? published->second.staging_path : path);
  const bool block = staged != rec.staged.end() && staged->second.block;
  if (req.has_volume_capability()) {
    if (auto why = access_type_mismatch(req.volume_capability(), req.volume_id(), block); !why.empty())
      return invalid("volume_capability: " + why);
  }
  if (block) return expand_block(req.volume_id(), resp);
  // A directory has no filesystem to grow: the controller's record is the capacity.
  std::int64_t capacity = range.required_bytes();
  std::int64_t recorded = -1;
  store_.read([&](const StoreState& catalogue) {
    if (auto it = catalogue.volumes.find(req.volume_id()); it != catalogue.volumes.end()) {
      recorded = it->second.capacity_bytes;
    }
    return Status::OK;
  });  // unreadable: the requested size stands
  if (range.limit_bytes() > 0 && recorded > range.limit_bytes()) {
    return {StatusCode::OUT_OF_RANGE, "volume " + req.volume_id() + " already has " + std::to_string(recorded) +
                                          " bytes, above limit_bytes; volumes never shrink"};
  }
  resp.set_capacity_bytes(std::max(capacity, recorded));
  return Status::OK;
}

Status Node::find_volume_path(const std::string& volume_id, const std::string& volume_path, std::string& out) const {
  // The spec's one error for both RPCs: the volume does not exist at volume_path. A relative path
  // is never one this plugin staged or published at.
  if (volume_path.front() != '/') {
    return {StatusCode::NOT_FOUND,
            "volume " + volume_id + " is not staged or published at '" + volume_path + "' (not an absolute path)"};
  }
  std::error_code ec;
  if (!fs::exists(volume_path, ec)) {
    return {StatusCode::NOT_FOUND,
            "volume " + volume_id + " not found: volume path " + volume_path + " does not exist"};
  }
  const auto rec = state_.snapshot();
  out = canonical_mount_path(volume_path);
  const bool here = [&] {
    if (auto it = rec.published.find(out); it != rec.published.end()) return it->second.volume_id == volume_id;
    if (auto it = rec.staged.find(out); it != rec.staged.end()) return it->second.volume_id == volume_id;
    return false;
  }();
  if (!here) return {StatusCode::NOT_FOUND, "volume " + volume_id + " is not staged or published at " + out};
  return Status::OK;
}

std::string published_elsewhere(const NodeRecord& rec, const std::string& volume_id, const std::string& target,
                                int mode) {
  using AM = csi::v1::VolumeCapability::AccessMode;
  for (const auto& [path, p] : rec.published) {
    if (path == target || p.volume_id != volume_id || !is_mount_point(path)) continue;
    if (mode == AM::SINGLE_NODE_SINGLE_WRITER || p.access_mode == AM::SINGLE_NODE_SINGLE_WRITER) return path;
  }
  return {};
}

Status Node::get_capabilities(csi::v1::NodeGetCapabilitiesResponse& resp) {
  using T = csi::v1::NodeServiceCapability::RPC;
  for (auto t : {T::STAGE_UNSTAGE_VOLUME, T::GET_VOLUME_STATS, T::EXPAND_VOLUME, T::VOLUME_CONDITION,
                 T::SINGLE_NODE_MULTI_WRITER}) {
    resp.add_capabilities()->mutable_rpc()->set_type(t);
  }
  if (config_.volume_mount_group) resp.add_capabilities()->mutable_rpc()->set_type(T::VOLUME_MOUNT_GROUP);
  return Status::OK;
}

Status Node::get_info(csi::v1::NodeGetInfoResponse& resp) {
  resp.set_node_id(config_.node_id);
  resp.set_max_volumes_per_node(
      current_max_volumes({config_.node_id, config_.max_volumes, config_.topology, config_.max_volumes_file}));
  if (!config_.topology.empty()) {
    auto* segs = resp.mutable_accessible_topology()->mutable_segments();
    for (const auto& [k, v] : config_.topology) (*segs)[k] = v;
  }
  return Status::OK;
}

}  // namespace mooring::hostpath
