#include "shared/metrics/families.hpp"

#include <atomic>
#include <memory>
#include <mutex>

namespace mooring::metrics {

namespace {

std::mutex enable_mutex;
std::unique_ptr<Families> owned;  // never destroyed before exit: handles point into it
std::atomic<Families*> current{nullptr};
bool controlplane_added = false;
bool nodeagent_added = false;

}  // namespace

Families& enable(Service service) {
  std::lock_guard lock(enable_mutex);
  if (!owned) {
    owned = std::make_unique<Families>();
    owned->csi_rpc_seconds = owned->registry.histogram(
        "mooring_csi_rpc_seconds", "CSI calls by plugin, method and gRPC status code, one attempt each.",
        latency_buckets());
  }
  auto& f = *owned;
  if (service == Service::controlplane && !controlplane_added) {
    controlplane_added = true;
    f.http_requests_seconds = f.registry.histogram(
        "mooring_http_requests_seconds", "REST API answers by route pattern and HTTP status code.", fast_buckets());
    f.state_commit_seconds = f.registry
                                 .histogram("mooring_state_commit_seconds",
                                            "One durable write of the state (a group of commits).", fast_buckets())
                                 .with({});
    f.claim_grant_seconds =
        f.registry
            .histogram("mooring_claim_grant_seconds",
                       "From a node agent's claim to the answer carrying the controller's publish context.",
                       latency_buckets())
            .with({});
    f.claim_release_seconds =
        f.registry
            .histogram("mooring_claim_release_seconds",
                       "From the allocation's stop (its claim leaving taken) to the claim being freed.",
                       latency_buckets())
            .with({});
    f.gc_retries_total =
        f.registry.counter("mooring_gc_retries_total", "Claim release steps that failed and were scheduled again.");
  }
  if (service == Service::nodeagent && !nodeagent_added) {
    nodeagent_added = true;
    f.csi_calls_deduplicated_total = f.registry.counter(
        "mooring_csi_calls_deduplicated_total",
        "Controller calls the control plane sent again (same operation id) that were answered without the plugin.");
  }
  current.store(&f);
  return f;
}

Families* families() { return current.load(std::memory_order_acquire); }

}  // namespace mooring::metrics
