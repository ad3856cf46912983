// Domain: the small enums every room shares (access, attachment and claim modes, claim states,
// allocation statuses, plugin types) with Nomad's spellings for the API and storage.
// Proto conversions live in shared/wire/proto_convert.hpp so this header stays free of generated code.
#pragma once

#include <optional>
#include <string_view>

namespace mooring::domain {

// `unknown` is "not set" (a volume with no claims has no current mode); it spells "".
enum class AccessMode {
  unknown,
  single_node_reader_only,
  single_node_writer,
  multi_node_reader_only,
  multi_node_single_writer,
  multi_node_multi_writer,
};
enum class AttachmentMode { unknown, file_system, block_device };
enum class ClaimMode { read, write };
// The release walk of a claim (Nomad's CSIVolumeClaimState): taken while the allocation uses
// it; unpublishing while the node side is in progress; then node-detached, controller-detached,
// ready-to-free. Each step is persisted before the next begins.
enum class ClaimState { taken, unpublishing, node_detached, controller_detached, ready_to_free };
// What the claim path did on the controller side, so the release never has to guess from the
// plugin's current (possibly not yet reported) facts: `sent` means ControllerPublish was or may
// have been sent, so ControllerUnpublish must follow; `not_needed` means the plugin was known not
// to attach through its controller; `unknown` is a claim recorded before this was kept.
enum class ControllerPublish { unknown, not_needed, sent };
enum class DesiredStatus { run, stop };
enum class ClientStatus { pending, running, complete, failed, lost };
enum class PluginType { controller, node, monolith };
enum class NodeStatus { initializing, ready, down };
// How a node agent gives a writable volume a non-root task's group when the node plugin cannot
// (no VOLUME_MOUNT_GROUP), as Kubernetes' fsGroupChangePolicy: `unset` means on_root_mismatch.
enum class GroupChangePolicy { unset, on_root_mismatch, always, none };

// "single-node-writer", "file-system", "read", "node-detached", "run", "lost", "monolith", "ready".
std::string_view to_string(AccessMode m);
std::string_view to_string(AttachmentMode m);
std::string_view to_string(ClaimMode m);
std::string_view to_string(ClaimState s);
std::string_view to_string(ControllerPublish p);
std::string_view to_string(DesiredStatus s);
std::string_view to_string(ClientStatus s);
std::string_view to_string(PluginType t);
std::string_view to_string(NodeStatus s);
std::string_view to_string(GroupChangePolicy p);  // "OnRootMismatch", "Always", "None"

// nullopt for anything that is not an exact spelling. "" parses to unknown for the two modes.
std::optional<AccessMode> parse_access_mode(std::string_view text);
std::optional<AttachmentMode> parse_attachment_mode(std::string_view text);
std::optional<ClaimMode> parse_claim_mode(std::string_view text);
std::optional<ClaimState> parse_claim_state(std::string_view text);
std::optional<ControllerPublish> parse_controller_publish(std::string_view text);
std::optional<DesiredStatus> parse_desired_status(std::string_view text);
std::optional<ClientStatus> parse_client_status(std::string_view text);
std::optional<PluginType> parse_plugin_type(std::string_view text);
std::optional<NodeStatus> parse_node_status(std::string_view text);
std::optional<GroupChangePolicy> parse_group_change_policy(std::string_view text);

// Facts about access modes that claim rules and placement share.
bool is_read_only(AccessMode m);    // *-reader-only
bool is_single_node(AccessMode m);  // single-node-*
// How many write claims the mode allows at once: 0 (reader-only), 1, or -1 for unlimited.
int max_writers(AccessMode m);

// complete, failed and lost never run again.
bool is_terminal(ClientStatus s);
// A past claim is any claim that is being released (every state but taken).
inline bool is_past(ClaimState s) { return s != ClaimState::taken; }
// The release walk is ordered (taken, unpublishing, node-detached, controller-detached,
// ready-to-free): has `s` not yet reached `target`?
inline bool is_before(ClaimState s, ClaimState target) { return static_cast<int>(s) < static_cast<int>(target); }

bool has_node(PluginType t);        // node or monolith
bool has_controller(PluginType t);  // controller or monolith

}  // namespace mooring::domain
