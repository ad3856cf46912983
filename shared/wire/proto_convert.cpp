// Wire: the mode enums <-> mooring.v1 and their csi.v1 spellings. Enum mappings are explicit
// switches so a new proto value is a compile-time warning (with -Werror) rather than a silent
// default. The messages are converted by family: proto_convert_{plugins,allocations,reports,mounts}.cpp.
#include "shared/wire/proto_convert.hpp"

namespace mooring::domain {

namespace v1 = ::mooring::v1;

v1::AccessMode to_proto(AccessMode m) {
  switch (m) {
    case AccessMode::unknown: return v1::ACCESS_MODE_UNKNOWN;
    case AccessMode::single_node_reader_only: return v1::ACCESS_MODE_SINGLE_NODE_READER_ONLY;
    case AccessMode::single_node_writer: return v1::ACCESS_MODE_SINGLE_NODE_WRITER;
    case AccessMode::multi_node_reader_only: return v1::ACCESS_MODE_MULTI_NODE_READER_ONLY;
    case AccessMode::multi_node_single_writer: return v1::ACCESS_MODE_MULTI_NODE_SINGLE_WRITER;
    case AccessMode::multi_node_multi_writer: return v1::ACCESS_MODE_MULTI_NODE_MULTI_WRITER;
  }
  return v1::ACCESS_MODE_UNKNOWN;
}

v1::AttachmentMode to_proto(AttachmentMode m) {
  switch (m) {
    case AttachmentMode::unknown: return v1::ATTACHMENT_MODE_UNKNOWN;
    case AttachmentMode::file_system: return v1::ATTACHMENT_MODE_FILE_SYSTEM;
    case AttachmentMode::block_device: return v1::ATTACHMENT_MODE_BLOCK_DEVICE;
  }
  return v1::ATTACHMENT_MODE_UNKNOWN;
}

v1::ClaimMode to_proto(ClaimMode m) {
  switch (m) {
    case ClaimMode::read: return v1::CLAIM_MODE_READ;
    case ClaimMode::write: return v1::CLAIM_MODE_WRITE;
  }
  return v1::CLAIM_MODE_UNSPECIFIED;
}

v1::ClaimState to_proto(ClaimState s) {
  switch (s) {
    case ClaimState::taken: return v1::CLAIM_STATE_TAKEN;
    case ClaimState::unpublishing: return v1::CLAIM_STATE_UNPUBLISHING;
    case ClaimState::node_detached: return v1::CLAIM_STATE_NODE_DETACHED;
    case ClaimState::controller_detached: return v1::CLAIM_STATE_CONTROLLER_DETACHED;
    case ClaimState::ready_to_free: return v1::CLAIM_STATE_READY_TO_FREE;
  }
  return v1::CLAIM_STATE_UNSPECIFIED;
}

v1::DesiredStatus to_proto(DesiredStatus s) {
  switch (s) {
    case DesiredStatus::run: return v1::DESIRED_STATUS_RUN;
    case DesiredStatus::stop: return v1::DESIRED_STATUS_STOP;
  }
  return v1::DESIRED_STATUS_UNSPECIFIED;
}

v1::ClientStatus to_proto(ClientStatus s) {
  switch (s) {
    case ClientStatus::pending: return v1::CLIENT_STATUS_PENDING;
    case ClientStatus::running: return v1::CLIENT_STATUS_RUNNING;
    case ClientStatus::complete: return v1::CLIENT_STATUS_COMPLETE;
    case ClientStatus::failed: return v1::CLIENT_STATUS_FAILED;
    case ClientStatus::lost: return v1::CLIENT_STATUS_LOST;
  }
  return v1::CLIENT_STATUS_UNSPECIFIED;
}

v1::PluginType to_proto(PluginType t) {
  switch (t) {
    case PluginType::controller: return v1::PLUGIN_TYPE_CONTROLLER;
    case PluginType::node: return v1::PLUGIN_TYPE_NODE;
    case PluginType::monolith: return v1::PLUGIN_TYPE_MONOLITH;
  }
  return v1::PLUGIN_TYPE_UNSPECIFIED;
}

std::optional<AccessMode> from_proto(v1::AccessMode m) {
  switch (m) {
    case v1::ACCESS_MODE_UNKNOWN: return AccessMode::unknown;
    case v1::ACCESS_MODE_SINGLE_NODE_READER_ONLY: return AccessMode::single_node_reader_only;
    case v1::ACCESS_MODE_SINGLE_NODE_WRITER: return AccessMode::single_node_writer;
    case v1::ACCESS_MODE_MULTI_NODE_READER_ONLY: return AccessMode::multi_node_reader_only;
    case v1::ACCESS_MODE_MULTI_NODE_SINGLE_WRITER: return AccessMode::multi_node_single_writer;
    case v1::ACCESS_MODE_MULTI_NODE_MULTI_WRITER: return AccessMode::multi_node_multi_writer;
    default: return std::nullopt;
  }
}

std::optional<AttachmentMode> from_proto(v1::AttachmentMode m) {
  switch (m) {
    case v1::ATTACHMENT_MODE_UNKNOWN: return AttachmentMode::unknown;
    case v1::ATTACHMENT_MODE_FILE_SYSTEM: return AttachmentMode::file_system;
    case v1::ATTACHMENT_MODE_BLOCK_DEVICE: return AttachmentMode::block_device;
    default: return std::nullopt;
  }
}

std::optional<ClaimMode> from_proto(v1::ClaimMode m) {
  switch (m) {
    case v1::CLAIM_MODE_READ: return ClaimMode::read;
    case v1::CLAIM_MODE_WRITE: return ClaimMode::write;
    default: return std::nullopt;
  }
}

std::optional<ClaimState> from_proto(v1::ClaimState s) {
  switch (s) {
    case v1::CLAIM_STATE_TAKEN: return ClaimState::taken;
    case v1::CLAIM_STATE_UNPUBLISHING: return ClaimState::unpublishing;
    case v1::CLAIM_STATE_NODE_DETACHED: return ClaimState::node_detached;
    case v1::CLAIM_STATE_CONTROLLER_DETACHED: return ClaimState::controller_detached;
    case v1::CLAIM_STATE_READY_TO_FREE: return ClaimState::ready_to_free;
    default: return std::nullopt;
  }
}

std::optional<DesiredStatus> from_proto(v1::DesiredStatus s) {
  switch (s) {
    case v1::DESIRED_STATUS_RUN: return DesiredStatus::run;
    case v1::DESIRED_STATUS_STOP: return DesiredStatus::stop;
    default: return std::nullopt;
  }
}

std::optional<ClientStatus> from_proto(v1::ClientStatus s) {
  switch (s) {
    case v1::CLIENT_STATUS_PENDING: return ClientStatus::pending;
    case v1::CLIENT_STATUS_RUNNING: return ClientStatus::running;
    case v1::CLIENT_STATUS_COMPLETE: return ClientStatus::complete;
    case v1::CLIENT_STATUS_FAILED: return ClientStatus::failed;
    case v1::CLIENT_STATUS_LOST: return ClientStatus::lost;
    default: return std::nullopt;
  }
}

std::optional<PluginType> from_proto(v1::PluginType t) {
  switch (t) {
    case v1::PLUGIN_TYPE_CONTROLLER: return PluginType::controller;
    case v1::PLUGIN_TYPE_NODE: return PluginType::node;
    case v1::PLUGIN_TYPE_MONOLITH: return PluginType::monolith;
    default: return std::nullopt;
  }
}

CsiAccessMode to_csi(AccessMode m) {
  using M = ::csi::v1::VolumeCapability::AccessMode;
  switch (m) {
    case AccessMode::unknown: return M::UNKNOWN;
    case AccessMode::single_node_reader_only: return M::SINGLE_NODE_READER_ONLY;
    case AccessMode::single_node_writer: return M::SINGLE_NODE_WRITER;
    case AccessMode::multi_node_reader_only: return M::MULTI_NODE_READER_ONLY;
    case AccessMode::multi_node_single_writer: return M::MULTI_NODE_SINGLE_WRITER;
    case AccessMode::multi_node_multi_writer: return M::MULTI_NODE_MULTI_WRITER;
  }
  return M::UNKNOWN;
}

std::optional<AccessMode> from_csi(CsiAccessMode m) {
  using M = ::csi::v1::VolumeCapability::AccessMode;
  switch (m) {
    case M::SINGLE_NODE_READER_ONLY: return AccessMode::single_node_reader_only;
    case M::SINGLE_NODE_WRITER: return AccessMode::single_node_writer;
    case M::MULTI_NODE_READER_ONLY: return AccessMode::multi_node_reader_only;
    case M::MULTI_NODE_SINGLE_WRITER: return AccessMode::multi_node_single_writer;
    case M::MULTI_NODE_MULTI_WRITER: return AccessMode::multi_node_multi_writer;
    default: return std::nullopt;
  }
}

}  // namespace mooring::domain
