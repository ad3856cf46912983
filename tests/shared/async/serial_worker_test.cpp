#include "shared/async/serial_worker.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/shared/async/run_coro.hpp"

namespace mooring::async {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Holds the worker inside a job until open() is called, so later submissions queue up.
struct Gate {
  std::promise<void> opened;
  std::shared_future<void> wait = opened.get_future().share();
  void hold(SerialWorker& w) {
    w.submit([f = wait] { f.wait(); });
  }
  void open() { opened.set_value(); }
};

TEST(SerialWorkerTest, RunsJobsInOrderOffTheCallerAndResumesOnTheExecutor) {
  asio::io_context io;
  SerialWorker worker("test");
  std::mutex m;
  std::vector<int> order;
  std::thread::id job_thread;
  for (int i = 0; i < 3; ++i) {
    worker.submit([&, i] {
      std::lock_guard lock(m);
      order.push_back(i);
    });
  }
  run_coro(io, [&]() -> asio::awaitable<void> {
    const auto caller = std::this_thread::get_id();
    co_await worker.run([&] {
      job_thread = std::this_thread::get_id();
      std::lock_guard lock(m);
      order.push_back(3);
    });
    EXPECT_EQ(std::this_thread::get_id(), caller);  // resumed on the io_context's thread
  }());
  EXPECT_NE(job_thread, std::this_thread::get_id());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(SerialWorkerTest, AKeyedJobReplacesItsQueuedPredecessorInPlace) {
  SerialWorker worker("test");
  Gate gate;
  gate.hold(worker);
  std::vector<std::string> written;  // touched by the worker only until wait_drained()
  worker.submit("file", [&] { written.push_back("file v1"); });
  worker.submit([&] { written.push_back("other"); });
  worker.submit("file", [&] { written.push_back("file v2"); });
  gate.open();
  worker.wait_drained();
  // v1 never ran; v2 ran where v1 stood, so a fence queued after v1 also covers v2.
  EXPECT_EQ(written, (std::vector<std::string>{"file v2", "other"}));

  // Once a keyed job has started, a new one of the same key queues behind it.
  worker.submit("file", [&] { written.push_back("file v3"); });
  worker.wait_drained();
  worker.submit("file", [&] { written.push_back("file v4"); });
  worker.wait_drained();
  EXPECT_EQ(written.back(), "file v4");
  EXPECT_EQ(written.size(), 4u);
}

TEST(SerialWorkerTest, RunRethrowsWhatTheJobThrewAndAThrowingSubmitDoesNotStopTheWorker) {
  asio::io_context io;
  SerialWorker worker("test");
  worker.submit([] { throw std::runtime_error("disk on fire"); });
  bool caught = false;
  bool after = false;
  run_coro(io, [&]() -> asio::awaitable<void> {
    try {
      co_await worker.run([] { throw std::runtime_error("no space left"); });
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "no space left";
    }
    co_await worker.run([&] { after = true; });
  }());
  EXPECT_TRUE(caught);
  EXPECT_TRUE(after);
}

TEST(SerialWorkerTest, DrainedWaitsForEverythingSubmittedBeforeIt) {
  asio::io_context io;
  SerialWorker worker("test");
  Gate gate;
  gate.hold(worker);
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) worker.submit([&] { ++done; });
  bool fenced = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await worker.drained();
        fenced = true;
        EXPECT_EQ(done.load(), 5);
      },
      asio::detached);
  // The fence keeps the io_context busy while it waits on the worker: run() must not return.
  std::thread opener([&] {
    std::this_thread::sleep_for(50ms);
    gate.open();
  });
  io.run_for(10s);
  opener.join();
  EXPECT_TRUE(fenced);
}

TEST(SerialWorkerTest, DestructionRunsWhatIsStillQueued) {
  std::atomic<int> done{0};
  {
    SerialWorker worker("test");
    Gate gate;
    gate.hold(worker);
    for (int i = 0; i < 10; ++i) worker.submit([&] { ++done; });
    gate.open();
  }
  EXPECT_EQ(done.load(), 10);
}

}  // namespace
}  // namespace mooring::async
