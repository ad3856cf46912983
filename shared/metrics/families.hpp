// Metrics room: Mooring's own families, one set per process. main() calls enable() for its
// service before it builds anything; components take their handles from families() when they
// are built (and look labelled series up once). With metrics off (--metrics=off) families() is
// null, every handle stays null and the hot paths skip even the clock reads.
// Gauges of state the services already hold (claims by state, plugin health, pending unmounts)
// are not here: each service computes them when scraped (GaugeSnapshot).
#pragma once

#include "shared/metrics/registry.hpp"

namespace mooring::metrics {

enum class Service { controlplane, nodeagent };

struct Families {
  Registry registry;
  // Both services: every CSI call, as the caller saw it. On the agent, one attempt of the CSI
  // client (shared/rpc/csi_client); on the control plane, one attempt of a controller call
  // forwarded through an agent. {plugin, method, code}; code is the gRPC status name.
  HistogramFamily csi_rpc_seconds;
  // Node agent only (null on the control plane): controller calls with an operation id that did
  // not reach the plugin again. {method, how}: how = joined (the call was in flight) | cached.
  CounterFamily csi_calls_deduplicated_total;
  // Control plane only (null on the agent).
  HistogramFamily http_requests_seconds;  // {route, code}: the route's pattern, never a raw id
  Histogram state_commit_seconds;         // one backend write (a group of commits with group commit)
  Histogram claim_grant_seconds;          // claim asked -> answered with the controller's publish context
  Histogram claim_release_seconds;        // allocation stopped (claim left "taken") -> claim freed
  CounterFamily gc_retries_total;         // {step}: a release step that failed and waits for its retry
};

// Creates the process's families (once) and adds those of `service`. Call before building the
// components that record; later calls for the same service return the same set.
Families& enable(Service service);
// The process's families, or null while enable() was not called (metrics off).
Families* families();

}  // namespace mooring::metrics
