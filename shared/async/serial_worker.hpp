// A thread of its own for blocking work (file writes and their fsyncs): jobs run one at a time,
// in the order they were submitted, so the executor thread never waits on a disk and two writes
// of one file never race. Coroutines await a job (or a fence) and resume on their own executor.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <memory>
#include <string>

namespace mooring::async {

class SerialWorker {
 public:
  // `name` is for logs (a job that throws).
  explicit SerialWorker(std::string name);
  // Runs every job still queued, then joins the thread.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues `job`; what it throws is logged. With a key, a job of the same key that has not
  // started yet is replaced in its place (only the newest content of a file matters): a fence
  // queued after the older job then waits for the newer content.
  void submit(std::function<void()> job);
  void submit(const std::string& key, std::function<void()> job);

  // Runs `job` after everything submitted before it and resumes the caller on its executor;
  // rethrows what `job` threw. `job` may refer to the caller's frame. Not cancellable: a job
  // lasts one disk write, and the caller must not act before it ends.
  boost::asio::awaitable<void> run(std::function<void()> job);
  // A fence: completes once everything submitted before the call has run.
  boost::asio::awaitable<void> drained();
  // The same, blocking the calling thread (destructors, tests); never from a job.
  void wait_drained();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::async
