// Test support: what a running process holds, read from the kernel (/proc/<pid>/fd and fdinfo),
// for the tests that pin which descriptors a child inherits and that the services open every
// descriptor close-on-exec.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace mooring::test {

// Descriptor number → what it points at: a path, "/dev/null", "pipe:[N]", "socket:[N]",
// "anon_inode:[eventfd]". Empty once the process is gone.
std::map<int, std::string> open_descriptors(pid_t pid);

// The descriptors of `pid` that are not close-on-exec (fdinfo's flags lack O_CLOEXEC), 0..2
// excepted, with what they point at.
std::map<int, std::string> inheritable_descriptors(pid_t pid);

// One "fd -> target" line per descriptor, for failure messages.
std::string describe_descriptors(const std::map<int, std::string>& fds);

// A running process: its parent and its command line with NULs as spaces ("/bin/sleep 30 ").
struct ProcessInfo {
  pid_t pid = 0;
  pid_t parent = 0;
  std::string cmdline;
};
// Every running process but this one (zombies excluded).
std::vector<ProcessInfo> running_processes();
// Those whose command line, working directory or any open descriptor names a path under `dir`:
// what a test that keeps everything in a temp dir left behind (services, plugins, tasks and
// their children, which inherit the task's log files).
std::vector<ProcessInfo> processes_using(const std::filesystem::path& dir);

}  // namespace mooring::test
