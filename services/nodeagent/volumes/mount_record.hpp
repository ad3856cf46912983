// The durable record of one allocation's use of one volume on this node: written before every
// stage/publish RPC (the intent) and after it (the result), kept through the unmount, removed only
// once nothing may be mounted any more and the control plane has been told. It carries all that an
// unmount needs, so a restarted agent can finish one without asking the control plane.
#pragma once

#include "shared/domain/claim.hpp"
#include "shared/domain/modes.hpp"
#include "shared/domain/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mooring::nodeagent {

// Where one CSI step stands for this record. `pending` means the RPC was (or may have been)
// sent without a known result: the mount may exist, so the negating call is still owed.
enum class StepState { none, pending, done };

enum class MountPhase {
  mounting,    // stage/publish in progress (or interrupted by a crash)
  mounted,     // published: the allocation may use the path
  unmounting,  // a release or an abandoned mount: unpublish/unstage still owed
  unmounted,   // node side clean; waiting to tell the control plane (only when `notify`)
};

std::string_view to_string(StepState s);
std::string_view to_string(MountPhase p);

struct MountRecord {
  std::string alloc_id;
  std::string volume_id;  // Mooring id: names the directories
  std::string plugin_id;
  std::string external_id;  // the provider's id: CSI volume_id in every RPC
  std::string usage;        // "rw-file-system-single-node-writer"
  bool read_only = false;
  domain::AccessMode access_mode = domain::AccessMode::unknown;
  domain::AttachmentMode attachment_mode = domain::AttachmentMode::unknown;
  std::string staging_path;  // empty when the plugin does not stage
  std::string target_path;

  MountPhase phase = MountPhase::mounting;
  // `staged` != none also means "this record holds a use of the staging path": NodeUnstage is
  // sent only by the last record of (volume, usage) that holds one.
  StepState staged = StepState::none;
  StepState published = StepState::none;
  bool notify = false;  // tell the control plane once unmounted (set by release)
  // How the volume got the task's group at this mount (VOLUME_MOUNT_GROUP, or the policy the
  // agent applied): kept so a remount of the same allocation does not walk the tree again, and
  // reported with the volume's stats (the claim's Ownership).
  std::optional<domain::VolumeOwnership> ownership;

  unsigned unmount_attempts = 0;
  std::string last_error;
  std::int64_t updated_unix_ms = 0;

  // Nothing of this record can still be mounted.
  bool clean() const { return staged == StepState::none && published == StepState::none; }
  bool operator==(const MountRecord&) const = default;
};

// JSON text (one file per record). Secrets are never part of a record.
std::string encode(const MountRecord& record);
domain::Expected<MountRecord> decode_mount_record(std::string_view text);

}  // namespace mooring::nodeagent
