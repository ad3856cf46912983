// Limits that follow the node (issue 44, as Kubernetes 1.36 re-reads a CSI node's allocatable):
// a RESOURCE_EXHAUSTED answer to NodeStage, NodePublish or a claim's ControllerPublish means the
// node plugin's max volumes may have dropped, so its supervisor fingerprints it (NodeGetInfo) at
// once instead of at the next fingerprint_interval, and the control plane places by the fresh
// figure. Supervisors watch by plugin id through weak references: either side may go first.
//
// Not thread-safe: the agent's executor only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mooring::async {
class WakeSignal;
}

namespace mooring::nodeagent {

class LimitsWatch {
 public:
  // What a supervisor leaves here: `wanted` set on an exhausted answer, then `wake` notified.
  struct Watcher {
    bool wanted = false;
    std::weak_ptr<async::WakeSignal> wake;
  };
  void watch(const std::string& plugin_id, const std::shared_ptr<Watcher>& watcher);
  // `plugin_id` empty: every plugin (a claim's answer does not say whose plugin refused).
  void exhausted(const std::string& plugin_id);

 private:
  std::map<std::string, std::vector<std::weak_ptr<Watcher>>> watchers_;
};

}  // namespace mooring::nodeagent
