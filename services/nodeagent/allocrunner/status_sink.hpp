// Where an alloc runner sends its client status and task events: the reporter that batches them
// into UpdateAllocations (allocrunner/status_reporter.hpp), or a recording fake in tests.
#pragma once

#include <string>
#include <vector>

#include "shared/domain/allocation.hpp"

namespace mooring::nodeagent {

class AllocStatusSink {
 public:
  virtual ~AllocStatusSink() = default;
  // Queues the allocation's current client status and the events new since the last report.
  // Never blocks; delivery is retried until the control plane acknowledges it.
  virtual void report(const std::string& alloc_id, domain::ClientStatus status,
                      std::vector<domain::TaskEvent> events) = 0;
};

}  // namespace mooring::nodeagent
