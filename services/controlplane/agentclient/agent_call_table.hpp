// Agent client room (agentclient/), private to agent_router.cpp: the node agent's stubs as one table.
#pragma once

#include <utility>

#include "csi/v1/csi.pb.h"
#include "mooring/v1/nodeagent.grpc.pb.h"
#include "services/controlplane/agentclient/agent_result.hpp"
#include "shared/csi/error_table.hpp"
#include "shared/rpc/client_call.hpp"

namespace mooring::controlplane::agentclient {

using Stub = v1::NodeAgent::Stub;

// The stubs, one row per call: the request as the agent takes it, its answer, how the CSI error
// table classifies it and the stub method that sends it. A controller call is the plugin's CSI
// request wrapped with the plugin id, named and classified as the CSI RPC.
template <class Request>
struct AgentCall;

#define MOORING_AGENT_CALL(Method, Response, classified_as)                                                         \
  template <>                                                                                                       \
  struct AgentCall<v1::Method##Request> {                                                                           \
    using Answer = Response;                                                                                        \
    static constexpr csi::Rpc classified = csi::Rpc::classified_as;                                                 \
    static void start(Stub& s, grpc::ClientContext* c, const v1::Method##Request* r, Answer* o, rpc::UnaryDone d) { \
      s.async()->Method(c, r, o, std::move(d));                                                                     \
    }                                                                                                               \
  };
#define MOORING_CONTROLLER_CALL(Method) MOORING_AGENT_CALL(Method, ::csi::v1::Method##Response, Method)

// A node detach is the agent's NodeUnpublishVolume and, for the last user, NodeUnstageVolume.
MOORING_AGENT_CALL(NodeDetachVolume, v1::NodeDetachVolumeResponse, NodeUnpublishVolume)
MOORING_AGENT_CALL(NodeExpandVolume, v1::NodeExpandVolumeResponse, NodeExpandVolume)
MOORING_AGENT_CALL(NodeVolumeStats, v1::NodeVolumeStatsResponse, NodeGetVolumeStats)
MOORING_CONTROLLER_CALL(CreateVolume)
MOORING_CONTROLLER_CALL(DeleteVolume)
MOORING_CONTROLLER_CALL(ControllerPublishVolume)
MOORING_CONTROLLER_CALL(ControllerUnpublishVolume)
MOORING_CONTROLLER_CALL(ControllerGetVolume)
MOORING_CONTROLLER_CALL(ControllerExpandVolume)
MOORING_CONTROLLER_CALL(ControllerModifyVolume)
MOORING_CONTROLLER_CALL(ValidateVolumeCapabilities)
MOORING_CONTROLLER_CALL(CreateSnapshot)
MOORING_CONTROLLER_CALL(DeleteSnapshot)
MOORING_CONTROLLER_CALL(ListSnapshots)
MOORING_CONTROLLER_CALL(GetSnapshot)
MOORING_CONTROLLER_CALL(ListVolumes)
MOORING_CONTROLLER_CALL(GetCapacity)
MOORING_CONTROLLER_CALL(CreateVolumeGroupSnapshot)
MOORING_CONTROLLER_CALL(DeleteVolumeGroupSnapshot)
MOORING_CONTROLLER_CALL(GetVolumeGroupSnapshot)

#undef MOORING_CONTROLLER_CALL
#undef MOORING_AGENT_CALL

template <class Request>
using AnswerTo = AgentResult<typename AgentCall<Request>::Answer>;

}  // namespace mooring::controlplane::agentclient
