// What /proc says about a process the agent may not be the parent of: a task or a plugin that
// an earlier agent started. Identity is (pid, start time): a pid alone may have been reused.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace mooring::nodeagent {

struct ProcStat {
  char state = '?';               // R, S, D, Z, ...
  pid_t session = 0;              // field 6
  std::uint64_t start_ticks = 0;  // field 22: clock ticks after boot
};

// nullopt when the process does not exist (or /proc cannot be read).
std::optional<ProcStat> proc_stat(pid_t pid);

// The start time of `pid`, or nullopt when it does not run (gone, or exited and not reaped).
std::optional<std::uint64_t> process_start_ticks(pid_t pid);

// Whether the process was started with `entry` ("NAME=value") in its environment.
bool environ_has(pid_t pid, const std::string& entry);

}  // namespace mooring::nodeagent
