// Domain: what is known of a plugin's instances and what is not. After a control plane restart
// (or an election) the stored health of an instance is from before: it counts as unknown until
// the node's agent is heard from. A capability no fingerprinted controller has reported is
// unknown, not "unsupported", while an instance has not been fingerprinted yet. Pure code.
#pragma once

#include <optional>
#include <string_view>

#include "shared/domain/plugin.hpp"

namespace mooring::domain {

// The health of an instance on a node whose agent the control plane has not heard from since it
// started leading (restarted, or newly elected): not known, so not healthy. The agent's
// registration or next heartbeat replaces it with what the agent reports.
inline constexpr std::string_view kHealthUnknown =
    "unknown until the node's agent is heard from (the control plane restarted or changed leader)";
bool health_unknown(const PluginInstance& instance);
// Some controller or node instance of the plugin has its health unknown.
bool any_health_unknown(const Plugin& plugin);

// Does a controller of the plugin support `flag` (CREATE_DELETE_VOLUME, EXPAND_VOLUME, ...)? true
// when a fingerprinted controller instance says so (what it said last: an instance whose health
// is unknown keeps its facts); nullopt while none does and some controller instance has not been
// fingerprinted yet (an agent reports its plugins before it has asked them): a caller answers
// "retry shortly" then, never "not supported"; false otherwise.
std::optional<bool> controller_supports(const Plugin& plugin, bool ControllerInfo::*flag);

}  // namespace mooring::domain
