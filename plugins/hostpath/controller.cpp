#include "plugins/hostpath/controller.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "plugins/hostpath/loop_device.hpp"
#include "plugins/hostpath/node_state.hpp"
#include "plugins/hostpath/options.hpp"
#include "plugins/hostpath/topology.hpp"
#include "plugins/hostpath/volume_capability.hpp"
#include "plugins/hostpath/volume_content.hpp"
#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

using grpc::Status;
using grpc::StatusCode;
namespace fs = std::filesystem;

const log::Logger kLog{"controller"};

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Block or mount: every requested capability asks for the same access type.
Status requested_access_type(const google::protobuf::RepeatedPtrField<csi::v1::VolumeCapability>& caps, bool& block) {
  block = !caps.empty() && caps.Get(0).has_block();
  for (const auto& cap : caps) {
    if (cap.has_block() != block)
      return invalid("volume_capabilities mix block and mount access types; a hostpath volume is one or the other");
  }
  return Status::OK;
}

std::int64_t allocated_bytes(const StoreState& s) {
  std::int64_t sum = 0;
  for (const auto& [id, v] : s.volumes) sum += v.capacity_bytes;
  return sum;
}

void fill_volume(const VolumeRecord& v, csi::v1::Volume& out) {
  out.set_volume_id(v.id);
  out.set_capacity_bytes(v.capacity_bytes);
  (*out.mutable_volume_context())["path"] = v.path;
  if (!v.source_snapshot_id.empty()) {
    out.mutable_content_source()->mutable_snapshot()->set_snapshot_id(v.source_snapshot_id);
  } else if (!v.source_volume_id.empty()) {
    out.mutable_content_source()->mutable_volume()->set_volume_id(v.source_volume_id);
  }
  for (const auto& segs : v.topology) {
    auto* t = out.add_accessible_topology();
    for (const auto& [k, val] : segs) (*t->mutable_segments())[k] = val;
  }
}

template <class Status_>
void fill_status(const VolumeRecord& v, Status_& status) {
  for (const auto& p : v.publications) status.add_published_node_ids(p.node_id);
  auto* cond = status.mutable_volume_condition();
  std::error_code ec;
  if (!fs::is_directory(v.path, ec)) {
    cond->set_abnormal(true);
    cond->set_message("volume directory " + v.path + " is missing");
  } else {
    cond->set_abnormal(false);
    cond->set_message("volume directory present");
  }
}

Status check_range(const csi::v1::CapacityRange& r) {
  if (r.required_bytes() < 0 || r.limit_bytes() < 0) return invalid("capacity_range: sizes must not be negative");
  if (r.limit_bytes() > 0 && r.required_bytes() > r.limit_bytes())
    return invalid("capacity_range: required_bytes " + std::to_string(r.required_bytes()) + " exceeds limit_bytes " +
                   std::to_string(r.limit_bytes()));
  return Status::OK;
}

}  // namespace

Status invalid(std::string msg) { return {StatusCode::INVALID_ARGUMENT, std::move(msg)}; }

std::string random_id(std::string_view prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string make_page_token(const std::string& last_id) { return "after:" + last_id; }

bool parse_page_token(const std::string& token, std::string& after_id) {
  if (!token.starts_with("after:")) return false;
  after_id = token.substr(6);
  return is_safe_id(after_id);
}

Status paginate(const std::vector<std::string>& ids, std::int32_t max_entries, const std::string& token,
                std::string& next_token, const std::function<void(const std::string&)>& fill) {
  if (max_entries < 0) return invalid("max_entries must not be negative");
  std::string after;
  if (!token.empty() && !parse_page_token(token, after)) {
    return {StatusCode::ABORTED, "invalid starting_token '" + token + "': restart the listing with an empty token"};
  }
  auto it = token.empty() ? ids.begin() : std::upper_bound(ids.begin(), ids.end(), after);
  std::int32_t n = 0;
  for (; it != ids.end(); ++it) {
    if (max_entries > 0 && n == max_entries) {
      next_token = make_page_token(*std::prev(it));
      break;
    }
    fill(*it);
    ++n;
  }
  return Status::OK;
}

std::int64_t Controller::available_bytes(const StoreState& state) const {
  if (config_.capacity_bytes > 0) return std::max<std::int64_t>(0, config_.capacity_bytes - allocated_bytes(state));
  struct statvfs st {};
  if (::statvfs(config_.data_dir.c_str(), &st) != 0) return 0;
  return static_cast<std::int64_t>(st.f_bavail) * static_cast<std::int64_t>(st.f_frsize);
}

namespace {

// What a CreateVolume asks for, checked before the catalogue is read.
struct CreateAsk {
  bool block = false;
  std::int64_t required = 0;
  std::int64_t limit = 0;
  std::string src_snapshot;
  std::string src_volume;
};

Status check_create(const csi::v1::CreateVolumeRequest& req, const ControllerConfig& config, CreateAsk& ask) {
  if (req.name().empty()) return invalid("name is required");
  if (req.volume_capabilities().empty()) return invalid("volume_capabilities is required");
  for (int i = 0; i < req.volume_capabilities_size(); ++i) {
    if (auto st = check_capability(req.volume_capabilities(i), "volume_capabilities[" + std::to_string(i) + "]");
        !st.ok())
      return st;
  }
  if (auto st = check_range(req.capacity_range()); !st.ok()) return st;
  if (auto st = requested_access_type(req.volume_capabilities(), ask.block); !st.ok()) return st;
  ask.required = req.capacity_range().required_bytes();
  ask.limit = req.capacity_range().limit_bytes();
  if (config.max_volume_size > 0 && ask.required > config.max_volume_size) {
    return {StatusCode::OUT_OF_RANGE, "required_bytes " + std::to_string(ask.required) +
                                          " exceeds the largest volume (" + std::to_string(config.max_volume_size) +
                                          " bytes)"};
  }
  const auto& src = req.volume_content_source();
  ask.src_snapshot = src.has_snapshot() ? src.snapshot().snapshot_id() : "";
  ask.src_volume = src.has_volume() ? src.volume().volume_id() : "";
  if (src.has_snapshot() && ask.src_snapshot.empty())
    return invalid("volume_content_source.snapshot.snapshot_id is empty");
  if (src.has_volume() && ask.src_volume.empty()) return invalid("volume_content_source.volume.volume_id is empty");
  return check_mutable(req.mutable_parameters(), config.modify_volume);
}

// Idempotent by name: the volume a repeated request made (`found`), or ALREADY_EXISTS when the
// name is taken by a volume the request does not describe.
Status find_same_name(const StoreState& state, const std::string& name, const CreateAsk& ask,
                      const VolumeRecord*& found) {
  for (const auto& [id, v] : state.volumes) {
    if (v.name != name) continue;
    if (v.capacity_bytes < ask.required || (ask.limit > 0 && v.capacity_bytes > ask.limit)) {
      return {StatusCode::ALREADY_EXISTS, "volume named '" + name + "' exists as " + id + " with " +
                                              std::to_string(v.capacity_bytes) +
                                              " bytes, incompatible with the requested capacity range"};
    }
    if (v.source_snapshot_id != ask.src_snapshot || v.source_volume_id != ask.src_volume) {
      return {StatusCode::ALREADY_EXISTS,
              "volume named '" + name + "' exists as " + id + " with a different content source"};
    }
    if (v.block != ask.block) {
      return {StatusCode::ALREADY_EXISTS,
              "volume named '" + name + "' exists as " + id + ", a " + (v.block ? "block" : "filesystem") + " volume"};
    }
    found = &v;
    return Status::OK;
  }
  return Status::OK;
}

// The snapshot or volume a new volume is filled from: its size and directory (none: empty).
struct ContentSource {
  std::int64_t size = 0;
  fs::path dir;
};

Status find_source(const StoreState& state, const CreateAsk& ask, ContentSource& source) {
  if (!ask.src_snapshot.empty()) {
    auto it = state.snapshots.find(ask.src_snapshot);
    if (it == state.snapshots.end())
      return {StatusCode::NOT_FOUND, "source snapshot " + ask.src_snapshot + " not found"};
    source = {it->second.size_bytes, it->second.path};
  } else if (!ask.src_volume.empty()) {
    auto it = state.volumes.find(ask.src_volume);
    if (it == state.volumes.end()) return {StatusCode::NOT_FOUND, "source volume " + ask.src_volume + " not found"};
    source = {it->second.capacity_bytes, it->second.path};
  }
  if (!source.dir.empty() && is_block_volume(source.dir) != ask.block) {
    return invalid(std::string("the content source is a ") + (ask.block ? "filesystem" : "block") +
                   " volume; it cannot fill a " + (ask.block ? "block" : "filesystem") + " volume");
  }
  return Status::OK;
}

// The volume's directory: a copy of the source or a new one, with its block image when block.
Status materialize(const VolumeRecord& v, const fs::path& source_dir) {
  std::error_code ec;
  if (!source_dir.empty()) {
    if (auto st = copy_tree(source_dir, v.path); !st.ok()) return st;
  } else if (fs::create_directories(v.path, ec); ec) {
    return {StatusCode::INTERNAL, "cannot create " + v.path + ": " + ec.message()};
  }
  if (v.block) {
    if (auto st = size_block_image(v.path, v.capacity_bytes); !st.ok()) {
      fs::remove_all(v.path, ec);
      return st;
    }
  }
  fs::permissions(v.path,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                      fs::perms::others_exec,
                  ec);
  return Status::OK;
}

// The size a new volume gets: what was required, else the source's, else the default (within
// the limit); never smaller than its source, larger than the largest volume or than what is free.
Status size_volume(const ControllerConfig& config, const CreateAsk& ask, std::int64_t source_size,
                   std::int64_t available, std::int64_t& size) {
  size = ask.required > 0 ? ask.required : (source_size > 0 ? source_size : config.default_volume_size);
  if (ask.required == 0 && ask.limit > 0 && size > ask.limit) size = ask.limit;
  if (source_size > 0 && size < source_size) {
    // The spec's "unsupported capacity_range" row names exactly this case.
    return {StatusCode::OUT_OF_RANGE, "requested capacity " + std::to_string(size) +
                                          " is smaller than the content source (" + std::to_string(source_size) +
                                          " bytes)"};
  }
  if (config.max_volume_size > 0 && size > config.max_volume_size) {
    return {StatusCode::OUT_OF_RANGE, "volume size " + std::to_string(size) + " exceeds the largest volume (" +
                                          std::to_string(config.max_volume_size) + " bytes)"};
  }
  if (size > available) {
    return {StatusCode::RESOURCE_EXHAUSTED,
            "not enough capacity for " + std::to_string(size) + " bytes (" + std::to_string(available) + " available)"};
  }
  return Status::OK;
}

}  // namespace

Status Controller::create_volume(const csi::v1::CreateVolumeRequest& req, csi::v1::CreateVolumeResponse& resp) {
  CreateAsk ask;
  if (auto st = check_create(req, config_, ask); !st.ok()) return st;
  const auto nodes = registered_nodes(config_.data_dir);
  return store_.transact([&](StoreTxn& txn) -> Status {
    const StoreState& state = txn.state();
    const VolumeRecord* same = nullptr;
    if (auto st = find_same_name(state, req.name(), ask, same); !st.ok() || same) {
      if (same) fill_volume(*same, *resp.mutable_volume());
      return st;
    }
    ContentSource source;
    if (auto st = find_source(state, ask, source); !st.ok()) return st;
    VolumeRecord v;
    if (auto st = size_volume(config_, ask, source.size, available_bytes(state), v.capacity_bytes); !st.ok()) return st;
    if (auto st = choose_topology(req.accessibility_requirements(), config_.topology, nodes, v.topology); !st.ok())
      return st;
    v.id = random_id("vol-");
    v.name = req.name();
    v.path = (store_.volumes_dir() / v.id).string();
    v.parameters = {req.parameters().begin(), req.parameters().end()};
    v.mutable_parameters = {req.mutable_parameters().begin(), req.mutable_parameters().end()};
    v.source_snapshot_id = ask.src_snapshot;
    v.source_volume_id = ask.src_volume;
    v.created_unix_ms = now_ms();
    v.block = ask.block;
    if (auto st = materialize(v, source.dir); !st.ok()) return st;
    fill_volume(v, *resp.mutable_volume());
    kLog.info("volume created", {{"volume_id", v.id}, {"name", v.name}, {"capacity_bytes", v.capacity_bytes}});
    txn.put_volume(std::move(v));
    return Status::OK;
  });
}

Status Controller::delete_volume(const csi::v1::DeleteVolumeRequest& req) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  // Deleting the directory under a live bind mount would destroy a workload's data, even when
  // the orchestrator skipped ControllerPublish: ask the node records too.
  const auto mounting = nodes_mounting(config_.data_dir, req.volume_id());
  std::string path;
  auto st = store_.transact([&](StoreTxn& txn) -> Status {
    const StoreState& state = txn.state();
    auto it = state.volumes.find(req.volume_id());
    if (it == state.volumes.end()) return Status::OK;  // already gone
    if (!mounting.empty()) {
      std::string nodes;
      for (const auto& n : mounting) nodes += (nodes.empty() ? "" : ", ") + n;
      return {StatusCode::FAILED_PRECONDITION,
              "volume " + req.volume_id() + " is still staged or published on node(s) " + nodes + "; unmount it first"};
    }
    if (!it->second.publications.empty()) {
      std::string nodes;
      for (const auto& p : it->second.publications) nodes += (nodes.empty() ? "" : ", ") + p.node_id;
      return {StatusCode::FAILED_PRECONDITION,
              "volume " + req.volume_id() + " is still published to node(s) " + nodes + "; unpublish it first"};
    }
    path = it->second.path;
    txn.erase_volume(req.volume_id());
    return Status::OK;
  });
  // The record is gone first: a crash here leaves an orphan directory, never a record without one.
  if (st.ok() && !path.empty()) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) kLog.warn("cannot remove volume directory", {{"path", path}, {"error", ec.message()}});
    kLog.info("volume deleted", {{"volume_id", req.volume_id()}});
  }
  return st;
}

Status Controller::validate_capabilities(const csi::v1::ValidateVolumeCapabilitiesRequest& req,
                                         csi::v1::ValidateVolumeCapabilitiesResponse& resp) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (req.volume_capabilities().empty()) return invalid("volume_capabilities is required");
  return store_.read([&](const StoreState& state) -> Status {
    const auto volume = state.volumes.find(req.volume_id());
    if (volume == state.volumes.end()) return {StatusCode::NOT_FOUND, "volume " + req.volume_id() + " not found"};
    for (const auto& cap : req.volume_capabilities()) {
      auto reason = unsupported_reason(cap);
      if (reason.empty()) reason = access_type_mismatch(cap, volume->first, volume->second.block);
      if (!reason.empty()) {
        resp.set_message(reason);
        return Status::OK;  // unsupported: no confirmation, reason in the message
      }
    }
    auto* c = resp.mutable_confirmed();
    *c->mutable_volume_capabilities() = req.volume_capabilities();
    *c->mutable_volume_context() = req.volume_context();
    *c->mutable_parameters() = req.parameters();
    *c->mutable_mutable_parameters() = req.mutable_parameters();
    return Status::OK;
  });
}

Status Controller::list_volumes(const csi::v1::ListVolumesRequest& req, csi::v1::ListVolumesResponse& resp) {
  return store_.read([&](const StoreState& state) -> Status {
    std::vector<std::string> ids;
    for (const auto& [id, v] : state.volumes) ids.push_back(id);  // std::map: already sorted
    std::string next;
    auto st = paginate(ids, req.max_entries(), req.starting_token(), next, [&](const std::string& id) {
      auto* e = resp.add_entries();
      fill_volume(state.volumes.at(id), *e->mutable_volume());
      fill_status(state.volumes.at(id), *e->mutable_status());
    });
    if (st.ok()) resp.set_next_token(next);
    return st;
  });
}

Status Controller::get_capacity(const csi::v1::GetCapacityRequest& req, csi::v1::GetCapacityResponse& resp) {
  return store_.read([&](const StoreState& state) -> Status {
    for (const auto& cap : req.volume_capabilities()) {
      if (!unsupported_reason(cap).empty()) {
        resp.set_available_capacity(0);  // cannot provision these capabilities at all
        return Status::OK;
      }
    }
    if (req.has_accessible_topology() && !config_.topology.empty() &&
        !segments_match(to_map(req.accessible_topology()), config_.topology)) {
      resp.set_available_capacity(0);
      return Status::OK;
    }
    const std::int64_t avail = available_bytes(state);
    resp.set_available_capacity(avail);
    const std::int64_t max_size = config_.max_volume_size > 0 ? std::min(avail, config_.max_volume_size) : avail;
    resp.mutable_maximum_volume_size()->set_value(max_size);
    resp.mutable_minimum_volume_size()->set_value(0);
    return Status::OK;
  });
}

Status Controller::get_capabilities(csi::v1::ControllerGetCapabilitiesResponse& resp) {
  using T = csi::v1::ControllerServiceCapability::RPC;
  for (auto t : {T::CREATE_DELETE_VOLUME, T::PUBLISH_UNPUBLISH_VOLUME, T::LIST_VOLUMES, T::GET_CAPACITY,
                 T::CREATE_DELETE_SNAPSHOT, T::LIST_SNAPSHOTS, T::CLONE_VOLUME, T::PUBLISH_READONLY, T::EXPAND_VOLUME,
                 T::LIST_VOLUMES_PUBLISHED_NODES, T::VOLUME_CONDITION, T::GET_VOLUME, T::SINGLE_NODE_MULTI_WRITER,
                 T::GET_SNAPSHOT}) {
    resp.add_capabilities()->mutable_rpc()->set_type(t);
  }
  if (config_.modify_volume) resp.add_capabilities()->mutable_rpc()->set_type(T::MODIFY_VOLUME);
  return Status::OK;
}

Status Controller::expand_volume(const csi::v1::ControllerExpandVolumeRequest& req,
                                 csi::v1::ControllerExpandVolumeResponse& resp) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  if (!req.has_capacity_range()) return invalid("capacity_range is required");
  if (auto st = check_range(req.capacity_range()); !st.ok()) return st;
  if (req.has_volume_capability()) {
    if (auto st = check_capability(req.volume_capability(), "volume_capability"); !st.ok()) return st;
  }
  const std::int64_t required = req.capacity_range().required_bytes();
  const std::int64_t limit = req.capacity_range().limit_bytes();
  if (config_.max_volume_size > 0 && required > config_.max_volume_size) {
    return {StatusCode::OUT_OF_RANGE, "required_bytes " + std::to_string(required) + " exceeds the largest volume (" +
                                          std::to_string(config_.max_volume_size) + " bytes)"};
  }
  return store_.transact([&](StoreTxn& txn) -> Status {
    const StoreState& state = txn.state();
    auto it = state.volumes.find(req.volume_id());
    if (it == state.volumes.end()) return {StatusCode::NOT_FOUND, "volume " + req.volume_id() + " not found"};
    const VolumeRecord& v = it->second;
    if (req.has_volume_capability()) {
      if (auto why = access_type_mismatch(req.volume_capability(), v.id, v.block); !why.empty())
        return invalid("volume_capability: " + why);
    }
    if (limit > 0 && v.capacity_bytes > limit) {
      return {StatusCode::OUT_OF_RANGE, "volume " + v.id + " already has " + std::to_string(v.capacity_bytes) +
                                            " bytes, above limit_bytes; volumes never shrink"};
    }
    if (required > v.capacity_bytes) {
      const std::int64_t growth = required - v.capacity_bytes;
      if (growth > available_bytes(state)) {
        return {StatusCode::RESOURCE_EXHAUSTED,
                "not enough capacity to grow volume " + v.id + " by " + std::to_string(growth) + " bytes"};
      }
      // A block volume's backing file grows with it; the node's loop device sees it at NodeExpandVolume.
      if (v.block) {
        if (auto st = size_block_image(v.path, required); !st.ok()) return st;
      }
      kLog.info("volume expanded", {{"volume_id", v.id}, {"from", v.capacity_bytes}, {"to", required}});
      txn.edit_volume(v.id)->capacity_bytes = required;
    }
    resp.set_capacity_bytes(v.capacity_bytes);
    resp.set_node_expansion_required(config_.node_expansion_required || v.block);
    return Status::OK;
  });
}

Status Controller::get_volume(const csi::v1::ControllerGetVolumeRequest& req,
                              csi::v1::ControllerGetVolumeResponse& resp) {
  if (req.volume_id().empty()) return invalid("volume_id is required");
  return store_.read([&](const StoreState& state) -> Status {
    auto it = state.volumes.find(req.volume_id());
    if (it == state.volumes.end()) return {StatusCode::NOT_FOUND, "volume " + req.volume_id() + " not found"};
    fill_volume(it->second, *resp.mutable_volume());
    fill_status(it->second, *resp.mutable_status());
    return Status::OK;
  });
}

}  // namespace mooring::hostpath
