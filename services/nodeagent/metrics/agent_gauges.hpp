// Metrics room of the node agent: the gauges computed at each scrape from what the agent holds —
// mooring_plugin_healthy{plugin,node,kind} from its plugins' fingerprints and
// mooring_pending_unmounts{plugin} from its mount records. Pure, so tested on values.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "mooring/v1/types.pb.h"
#include "shared/metrics/registry.hpp"

namespace mooring::nodeagent {

// `pending_unmounts`: plugin id -> mounts still owed an unpublish/unstage. Every node plugin with a
// fingerprint gets a pending_unmounts series (0 when none is owed).
std::vector<metrics::GaugeSnapshot> agent_gauges(const std::string& node_id,
                                                 const std::vector<::mooring::v1::PluginFingerprint>& fingerprints,
                                                 const std::map<std::string, std::size_t>& pending_unmounts);

}  // namespace mooring::nodeagent
