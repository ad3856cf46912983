// Bench helpers: percentiles of a latency sample (nearest rank, as the Python side computes them).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace mooring::bench {

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

}  // namespace mooring::bench
