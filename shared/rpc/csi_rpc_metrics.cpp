#include "shared/rpc/csi_rpc_metrics.hpp"

#include "shared/metrics/families.hpp"

namespace mooring::rpc {

CsiRpcMetrics::CsiRpcMetrics() {
  if (auto* f = metrics::families()) family_ = f->csi_rpc_seconds;
}

void CsiRpcMetrics::observe(std::string_view plugin, csi::Rpc rpc, grpc::StatusCode code, double seconds) {
  if (!family_) return;
  auto by_plugin = series_.find(plugin);
  if (by_plugin == series_.end())
    by_plugin = series_.emplace(std::string(plugin), decltype(series_)::mapped_type{}).first;
  const std::pair<int, int> key{static_cast<int>(rpc), static_cast<int>(code)};
  auto it = by_plugin->second.find(key);
  if (it == by_plugin->second.end())
    it = by_plugin->second
             .emplace(key, family_.with({{"plugin", std::string(plugin)},
                                         {"method", std::string(csi::to_string(rpc))},
                                         {"code", std::string(csi::code_name(code))}}))
             .first;
  it->second.observe(seconds);
}

}  // namespace mooring::rpc
