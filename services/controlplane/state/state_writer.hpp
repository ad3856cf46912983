// State room, private to the store's files: the writer thread of group commit.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "services/controlplane/state/state_store.hpp"

namespace mooring::controlplane {

// One thread that runs the backend's group writes, one at a time, so the executor never waits on
// SQLite and its fsync. The store hands it a job only when none is in flight.
struct StateStore::Writer {
  std::mutex mutex;
  std::condition_variable wake;
  std::function<void()> job;
  bool stopping = false;
  std::thread thread{[this] {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stopping || job; });
      if (!job) return;  // stopping, and the last job has run
      auto run = std::exchange(job, {});
      lock.unlock();
      run();
      lock.lock();
    }
  }};

  void submit(std::function<void()> fn) {
    {
      std::lock_guard lock(mutex);
      job = std::move(fn);
    }
    wake.notify_one();
  }
  ~Writer() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_one();
    thread.join();  // a job in flight finishes first: its writes are on disk
  }
};

}  // namespace mooring::controlplane
