#include "plugins/hostpath/volume_capability.hpp"

#include <string>

namespace mooring::hostpath {

using Mode = csi::v1::VolumeCapability::AccessMode;

std::string unsupported_reason(const csi::v1::VolumeCapability& cap) {
  if (!cap.has_mount() && !cap.has_block()) return "access_type is missing (expected mount or block)";
  if (!cap.has_access_mode() || cap.access_mode().mode() == Mode::UNKNOWN) return "access_mode is missing or UNKNOWN";
  if (!csi::v1::VolumeCapability_AccessMode_Mode_IsValid(cap.access_mode().mode())) return "access_mode is unknown";
  return {};
}

std::string access_type_mismatch(const csi::v1::VolumeCapability& cap, const std::string& volume_id,
                                 bool block_volume) {
  if (cap.has_block() && !block_volume)
    return "volume " + volume_id + " is a filesystem volume (a directory): request the mount access type, not block";
  if (cap.has_mount() && block_volume)
    return "volume " + volume_id + " is a block volume (a loop device): request the block access type, not mount";
  return {};
}

grpc::Status check_capability(const csi::v1::VolumeCapability& cap, std::string_view field) {
  if (auto reason = unsupported_reason(cap); !reason.empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, std::string(field) + ": " + reason};
  }
  return grpc::Status::OK;
}

bool is_single_node_mode(int mode) {
  return mode == Mode::SINGLE_NODE_WRITER || mode == Mode::SINGLE_NODE_READER_ONLY ||
         mode == Mode::SINGLE_NODE_SINGLE_WRITER || mode == Mode::SINGLE_NODE_MULTI_WRITER;
}

bool is_reader_only_mode(int mode) {
  return mode == Mode::SINGLE_NODE_READER_ONLY || mode == Mode::MULTI_NODE_READER_ONLY;
}

bool wants_read_only(const csi::v1::VolumeCapability& cap, bool readonly_flag) {
  if (readonly_flag || is_reader_only_mode(cap.access_mode().mode())) return true;
  if (cap.has_mount()) {
    for (const auto& flag : cap.mount().mount_flags()) {
      if (flag == "ro") return true;
    }
  }
  return false;
}

}  // namespace mooring::hostpath
