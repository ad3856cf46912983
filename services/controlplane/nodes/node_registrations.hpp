// Nodes room: how many times each node's agent has registered with this control plane, counted
// in memory since the process started. A registration is a new life of the agent (restarted,
// maybe at another address): a call that failed UNAVAILABLE against the one before is sent again
// to it (agentclient/agent_router.hpp). Counting it here also sees an agent that came back at the
// same address, which its node record cannot show. Use on the store's executor only.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace mooring::controlplane {

class NodeRegistrations {
 public:
  // The agent service: the node's registration was committed.
  void registered(const std::string& node_id) { ++counts_[node_id]; }
  // How many registrations of the node this process has seen (0: none yet).
  std::uint64_t count(const std::string& node_id) const {
    auto it = counts_.find(node_id);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, std::uint64_t> counts_;
};

}  // namespace mooring::controlplane
