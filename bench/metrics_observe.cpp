// Bench: what one observation costs on a hot path, in process: a CSI call's
// (rpc::CsiRpcMetrics::observe: the cached series lookup by plugin/method/code, then
// prometheus-cpp's Histogram::Observe) and a bare histogram observation, beside the reference
// every timed call site also pays: reading the steady clock. With --metrics=off the call sites
// skip all of it. Output: one JSON object on stdout.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/stats.hpp"
#include "shared/metrics/registry.hpp"
#include "shared/rpc/csi_rpc_metrics.hpp"

namespace {

using mooring::bench::Clock;

template <class F>
double ns_per_call(long n, F&& f) {
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) f(i);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  long n = 2'000'000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--calls") n = std::atol(argv[i + 1]);
  mooring::metrics::Registry registry;
  auto family = registry.histogram("bench_csi_rpc_seconds", "bench", mooring::metrics::latency_buckets());
  mooring::rpc::CsiRpcMetrics csi(family);
  const mooring::csi::Rpc rpcs[] = {mooring::csi::Rpc::NodePublishVolume, mooring::csi::Rpc::NodeUnpublishVolume,
                                    mooring::csi::Rpc::Probe};
  const std::string plugin = "hostpath";
  auto bare = registry.histogram("bench_seconds", "bench", mooring::metrics::fast_buckets()).with({});
  volatile std::int64_t sink = 0;
  // Warm up: the series exist before timing, as after a component's first calls.
  for (auto r : rpcs) csi.observe(plugin, r, grpc::StatusCode::OK, 0.001);
  const double clock_ns = ns_per_call(n, [&](long) { sink = sink + Clock::now().time_since_epoch().count(); });
  const double csi_ns = ns_per_call(n, [&](long i) {
    csi.observe(plugin, rpcs[i % 3], grpc::StatusCode::OK, 0.0005 * static_cast<double>(i % 7));
  });
  const double bare_ns = ns_per_call(n, [&](long i) { bare.observe(0.0001 * static_cast<double>(i % 11)); });
  std::cout << nlohmann::json{{"calls", n}, {"clock_read_ns", clock_ns}, {"csi_observe_ns", csi_ns},
                              {"histogram_observe_ns", bare_ns}}
                   .dump()
            << "\n";
  return sink == 42 ? 1 : 0;
}
