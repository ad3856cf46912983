// mooring-hostpath: where a new volume lives — CreateVolume's accessibility requirements against
// the topology of this plugin and of the nodes registered in the data dir. Pure.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "csi/v1/csi.pb.h"
#include "plugins/hostpath/node_state.hpp"

namespace mooring::hostpath {

using Segments = std::map<std::string, std::string>;

// Every segment `want` names, `have` has with the same value.
bool segments_match(const Segments& want, const Segments& have);
Segments to_map(const csi::v1::Topology& t);

// Chooses the volume's topology: preferred first, then requisite, each only if some known node
// (or this plugin) lives there. No requirement → this plugin's own topology. None reachable →
// RESOURCE_EXHAUSTED naming the requested segments.
grpc::Status choose_topology(const csi::v1::TopologyRequirement& req, const Segments& own,
                             const std::vector<NodeRegistration>& nodes, std::vector<Segments>& out);

}  // namespace mooring::hostpath
