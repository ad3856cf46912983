#include "services/nodeagent/plugins/limits_watch.hpp"

#include <algorithm>

#include "shared/async/wake_signal.hpp"

namespace mooring::nodeagent {

void LimitsWatch::watch(const std::string& plugin_id, const std::shared_ptr<Watcher>& watcher) {
  auto& list = watchers_[plugin_id];
  std::erase_if(list, [](const auto& w) { return w.expired(); });
  list.push_back(watcher);
}

void LimitsWatch::exhausted(const std::string& plugin_id) {
  for (auto& [id, list] : watchers_) {
    if (!plugin_id.empty() && id != plugin_id) continue;
    for (const auto& weak : list) {
      auto w = weak.lock();
      if (!w) continue;
      w->wanted = true;
      if (auto wake = w->wake.lock()) wake->notify();
    }
  }
}

}  // namespace mooring::nodeagent
