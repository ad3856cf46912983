// What every Mooring service does to itself so that neither its children nor the readers of its
// output can hurt it (issue 40): a closed output pipe never kills it, and no descriptor it holds
// crosses an exec. No Asio here: callers pass a socket's native_handle().
#pragma once

namespace mooring::process {

// Ignores SIGPIPE for the whole process: a write to a pipe whose reader is gone (a `tee` that
// died of Ctrl-C, a log collector restarted, a plugin's socket) fails with EPIPE instead of
// killing the service before its shutdown ran. Children get the default back (the agent's spawn
// resets dispositions). Call first thing in main().
void survive_closed_pipes();

// Turns off Abseil's mutex deadlock detection, which Debian's debug-built Abseil runs on every
// lock gRPC takes (abseil_mutexes.cpp says what it cost). For the binaries that link gRPC; call
// first thing in main(), before any gRPC object exists.
void skip_mutex_deadlock_detection();

// Sets FD_CLOEXEC on `fd`. For descriptors made by code that does not ask for it itself: Asio
// opens sockets and accepts connections without SOCK_CLOEXEC. False (errno set) on failure.
bool close_on_exec(int fd);

}  // namespace mooring::process
