// The plugin supervision as the CSI plugin hook sees it, for the runner tests: supervise() answers
// what the test set (after an optional delay), and every call is recorded.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "services/nodeagent/allocrunner/plugin_task_supervision.hpp"
#include "shared/async/sleep.hpp"

namespace mooring::nodeagent {

class FakePluginTaskSupervision final : public PluginTaskSupervision {
 public:
  domain::Status answer;  // what supervise() returns
  std::chrono::milliseconds delay{0};
  std::vector<std::string> supervised;  // "<alloc> <plugin id> <socket path>"
  std::vector<std::string> stopped_allocs;

  boost::asio::awaitable<domain::Status> supervise(const std::string& alloc_id, std::uint64_t,
                                                   const domain::TaskCSIPlugin& plugin,
                                                   const std::string& socket_path, PluginTaskEvents events) override {
    supervised.push_back(alloc_id + " " + plugin.id + " " + socket_path);
    if (delay.count() > 0) co_await async::sleep_for(delay);
    if (answer && events) events("PluginHealthy", "plugin " + plugin.id + " became healthy");
    co_return answer;
  }
  void stopped(const std::string& alloc_id) override { stopped_allocs.push_back(alloc_id); }
};

}  // namespace mooring::nodeagent
