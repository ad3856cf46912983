// The allocrunner room: one runner per allocation placed on this node, its lifecycle hooks, the
// task process and the allocation's durable state. This file: the hook interface (Nomad's
// allocrunner hooks). The runner calls Prerun before the task starts, Poststart once it runs
// (also after a restart re-adopted it), Postrun after it ended (or after a failed Prerun), Destroy
// when the allocation's state is removed, Shutdown when the agent stops with the allocation still
// running (the restart picks it up again).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <string>
#include <string_view>

#include "shared/domain/result.hpp"

namespace mooring::nodeagent {

class AllocHook {
 public:
  virtual ~AllocHook() = default;
  virtual std::string_view name() const = 0;

  // Before the task starts; may add environment variables for the task. An error fails the
  // allocation (Postrun still runs). Cancelled when the allocation is stopped meanwhile.
  virtual boost::asio::awaitable<domain::Status> prerun(std::map<std::string, std::string>& task_env) = 0;
  // After the task started (or was re-adopted after an agent restart), e.g. to wait until a plugin
  // task is healthy. An error fails the allocation and stops the task. Cancelled when the
  // allocation is stopped or the task ends meanwhile.
  virtual boost::asio::awaitable<domain::Status> poststart() { co_return domain::Status{}; }
  // After the task ended or was stopped, or after a failed or cancelled Prerun. Must return at
  // once: anything slow runs in the background, owned by someone who outlives the runner.
  virtual void postrun() = 0;
  // The allocation is gone for good: its state is being removed.
  virtual void destroy() {}
  // The agent is shutting down; whatever the hook has running is left for the restart.
  virtual void shutdown() {}
};

}  // namespace mooring::nodeagent
