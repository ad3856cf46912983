// Mode spellings: one table per enum so to_string and parse can never disagree.
#include "shared/domain/modes.hpp"

#include <array>
#include <utility>

namespace mooring::domain {
namespace {

template <class E, std::size_t N>
using Table = std::array<std::pair<E, std::string_view>, N>;

constexpr Table<AccessMode, 6> kAccess{{
    {AccessMode::unknown, ""},
    {AccessMode::single_node_reader_only, "single-node-reader-only"},
    {AccessMode::single_node_writer, "single-node-writer"},
    {AccessMode::multi_node_reader_only, "multi-node-reader-only"},
    {AccessMode::multi_node_single_writer, "multi-node-single-writer"},
    {AccessMode::multi_node_multi_writer, "multi-node-multi-writer"},
}};
constexpr Table<AttachmentMode, 3> kAttachment{{
    {AttachmentMode::unknown, ""},
    {AttachmentMode::file_system, "file-system"},
    {AttachmentMode::block_device, "block-device"},
}};
constexpr Table<ClaimMode, 2> kClaimMode{{{ClaimMode::read, "read"}, {ClaimMode::write, "write"}}};
constexpr Table<ClaimState, 5> kClaimState{{
    {ClaimState::taken, "taken"},
    {ClaimState::unpublishing, "unpublishing"},
    {ClaimState::node_detached, "node-detached"},
    {ClaimState::controller_detached, "controller-detached"},
    {ClaimState::ready_to_free, "ready-to-free"},
}};
constexpr Table<ControllerPublish, 3> kControllerPublish{{
    {ControllerPublish::unknown, ""},
    {ControllerPublish::not_needed, "not-needed"},
    {ControllerPublish::sent, "sent"},
}};
constexpr Table<DesiredStatus, 2> kDesired{{{DesiredStatus::run, "run"}, {DesiredStatus::stop, "stop"}}};
constexpr Table<ClientStatus, 5> kClient{{
    {ClientStatus::pending, "pending"},
    {ClientStatus::running, "running"},
    {ClientStatus::complete, "complete"},
    {ClientStatus::failed, "failed"},
    {ClientStatus::lost, "lost"},
}};
constexpr Table<PluginType, 3> kPluginType{{
    {PluginType::controller, "controller"},
    {PluginType::node, "node"},
    {PluginType::monolith, "monolith"},
}};
constexpr Table<NodeStatus, 3> kNodeStatus{{
    {NodeStatus::initializing, "initializing"},
    {NodeStatus::ready, "ready"},
    {NodeStatus::down, "down"},
}};
constexpr Table<GroupChangePolicy, 4> kGroupChangePolicy{{
    {GroupChangePolicy::unset, ""},
    {GroupChangePolicy::on_root_mismatch, "OnRootMismatch"},
    {GroupChangePolicy::always, "Always"},
    {GroupChangePolicy::none, "None"},
}};

template <class E, std::size_t N>
std::string_view name(const Table<E, N>& table, E value) {
  for (const auto& [e, s] : table) {
    if (e == value) return s;
  }
  return "invalid";
}

template <class E, std::size_t N>
std::optional<E> parse(const Table<E, N>& table, std::string_view text) {
  for (const auto& [e, s] : table) {
    if (s == text) return e;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(AccessMode m) { return name(kAccess, m); }
std::string_view to_string(AttachmentMode m) { return name(kAttachment, m); }
std::string_view to_string(ClaimMode m) { return name(kClaimMode, m); }
std::string_view to_string(ClaimState s) { return name(kClaimState, s); }
std::string_view to_string(ControllerPublish p) { return name(kControllerPublish, p); }
std::string_view to_string(DesiredStatus s) { return name(kDesired, s); }
std::string_view to_string(ClientStatus s) { return name(kClient, s); }
std::string_view to_string(PluginType t) { return name(kPluginType, t); }
std::string_view to_string(NodeStatus s) { return name(kNodeStatus, s); }
std::string_view to_string(GroupChangePolicy p) { return name(kGroupChangePolicy, p); }

std::optional<AccessMode> parse_access_mode(std::string_view t) { return parse(kAccess, t); }
std::optional<AttachmentMode> parse_attachment_mode(std::string_view t) { return parse(kAttachment, t); }
std::optional<ClaimMode> parse_claim_mode(std::string_view t) { return parse(kClaimMode, t); }
std::optional<ClaimState> parse_claim_state(std::string_view t) { return parse(kClaimState, t); }
std::optional<ControllerPublish> parse_controller_publish(std::string_view t) { return parse(kControllerPublish, t); }
std::optional<DesiredStatus> parse_desired_status(std::string_view t) { return parse(kDesired, t); }
std::optional<ClientStatus> parse_client_status(std::string_view t) { return parse(kClient, t); }
std::optional<PluginType> parse_plugin_type(std::string_view t) { return parse(kPluginType, t); }
std::optional<NodeStatus> parse_node_status(std::string_view t) { return parse(kNodeStatus, t); }
std::optional<GroupChangePolicy> parse_group_change_policy(std::string_view t) { return parse(kGroupChangePolicy, t); }

bool is_read_only(AccessMode m) {
  return m == AccessMode::single_node_reader_only || m == AccessMode::multi_node_reader_only;
}

bool is_single_node(AccessMode m) {
  return m == AccessMode::single_node_reader_only || m == AccessMode::single_node_writer;
}

int max_writers(AccessMode m) {
  switch (m) {
    case AccessMode::single_node_writer:
    case AccessMode::multi_node_single_writer: return 1;
    case AccessMode::multi_node_multi_writer: return -1;
    default: return 0;
  }
}

bool is_terminal(ClientStatus s) {
  return s == ClientStatus::complete || s == ClientStatus::failed || s == ClientStatus::lost;
}

bool has_node(PluginType t) { return t == PluginType::node || t == PluginType::monolith; }
bool has_controller(PluginType t) { return t == PluginType::controller || t == PluginType::monolith; }

}  // namespace mooring::domain
