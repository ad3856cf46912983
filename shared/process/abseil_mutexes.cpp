// Abseil's mutex deadlock detector, off (issue 46). Debian's Abseil is built without NDEBUG, so
// every absl::Mutex that gRPC takes records its lock order in a global graph (GraphCycles): about
// 5 % of the control plane's steady CPU with 1000 agents heartbeating (perf, engineering notes
// "Node scale"). Our own code takes no absl::Mutex, and gRPC is tested upstream with it off.
#include <absl/synchronization/mutex.h>

#include "shared/process/process_hygiene.hpp"

namespace mooring::process {

void skip_mutex_deadlock_detection() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace mooring::process
