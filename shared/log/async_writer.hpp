// Log lines written by a thread of their own, so a busy event loop never waits for write(2).
#pragma once

#include <chrono>
#include <cstddef>

namespace mooring::log {

// While one is alive, log lines are formatted on the caller's thread (time stamp included) and
// queued; a writer thread writes what has gathered in one write per batch. The writer wakes on
// the first line after an idle spell and then waits `batch_window` for more; warn and error
// lines are written at once. A queue above `max_queued` bytes (a sink that stopped draining)
// makes callers wait for room, as a synchronous write would: nothing is dropped. The destructor
// writes every queued line before it returns, so a clean stop loses none; a crash loses at most
// the last window's lines. One per process (a second one is inert): declare it first in main(),
// right after log::configure(), so it is destroyed last.
class AsyncWriter {
 public:
  struct Options {
    std::chrono::milliseconds batch_window{5};
    std::size_t max_queued = 4u << 20;
  };
  AsyncWriter();
  explicit AsyncWriter(Options options);
  ~AsyncWriter();
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

 private:
  bool active_ = false;
};

// Returns once every line logged before the call is written (at once without an AsyncWriter).
// log::configure() calls it: what is queued belongs to the old sink.
void flush();

}  // namespace mooring::log
