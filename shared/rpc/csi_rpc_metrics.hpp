// The mooring_csi_rpc_seconds series a CSI caller records into, looked up once per
// (plugin, method, code) and kept: a lookup in prometheus-cpp takes the family's lock and builds a
// label map, which a call path should not pay each time. One per caller and executor (no lock).
// With metrics off it holds nothing and enabled() is false, so callers skip the clock too.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>

#include <grpcpp/support/status.h>

#include "shared/csi/error_table.hpp"
#include "shared/metrics/registry.hpp"

namespace mooring::rpc {

class CsiRpcMetrics {
 public:
  CsiRpcMetrics();  // the process's family, if metrics are on (metrics/families.hpp)
  explicit CsiRpcMetrics(metrics::HistogramFamily family) : family_(std::move(family)) {}

  bool enabled() const { return static_cast<bool>(family_); }
  void observe(std::string_view plugin, csi::Rpc rpc, grpc::StatusCode code, double seconds);

 private:
  metrics::HistogramFamily family_;
  std::map<std::string, std::map<std::pair<int, int>, metrics::Histogram>, std::less<>> series_;
};

}  // namespace mooring::rpc
