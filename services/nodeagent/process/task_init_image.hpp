// The walled task's init (task_init.cpp), built as a static program and embedded in the agent:
// nothing to install beside the agent, and reachable from inside the task's root, where no host
// path is.
#pragma once

namespace mooring::nodeagent {

// The memfd's name: /proc/<pid>/exe of a running init reads "/memfd:<name> (deleted)".
inline constexpr const char* kTaskInitName = "mooring-task-init";

// A sealed, close-on-exec memfd holding the init's image, made once per process (thread-safe);
// -1 with errno set when it could not be made.
int task_init_image();

}  // namespace mooring::nodeagent
