// GC room: the pass loop the threshold-based collectors share (allocation GC, node GC): a pass at
// start, then every `period`, or a fraction of the threshold (within 1 s .. 5 min) when unset.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "shared/async/task_group.hpp"

namespace mooring::controlplane::gc {

// The period of the passes: `configured` when set, else threshold / `fraction` clamped.
std::chrono::milliseconds pass_period(std::chrono::milliseconds configured, std::chrono::milliseconds threshold,
                                      int fraction);

// Spawns the loop in `tasks` (cancelled and joined with it); `pass` runs on the group's executor.
void start_passes(async::TaskGroup& tasks, const std::string& name, std::chrono::milliseconds period,
                  std::function<void()> pass);

}  // namespace mooring::controlplane::gc
