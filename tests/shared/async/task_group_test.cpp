#include "shared/async/task_group.hpp"

#include "shared/async/sleep.hpp"
#include "shared/log/log.hpp"
#include "tests/shared/async/run_coro.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

namespace mooring::async {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
asio::awaitable<void> sleep_forever_throwing() {
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::hours(1));
  co_await t.async_wait(asio::use_awaitable);  // throws operation_aborted on cancellation
}

// Counts frames that ended, however they ended (a child cancelled before its first co_await
// throws operation_aborted there; one cancelled later sees SleepEnd::cancelled).
struct CountOnExit {
  int& count;
  ~CountOnExit() { ++count; }
};

asio::awaitable<void> sleep_forever_quietly(int& stopped) {
  CountOnExit guard{stopped};
  co_await sleep_for(std::chrono::hours(1));
}

asio::awaitable<void> sleep_then(std::chrono::milliseconds d, int& done) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
  ++done;
}

class TaskGroupTest : public ::testing::Test {
 protected:
  void SetUp() override { log::configure(log::Level::debug, log::Format::text, &logs_); }
  void TearDown() override { log::configure(log::Level::info, log::Format::text, nullptr); }
  std::ostringstream logs_;
};
}  // namespace

TEST_F(TaskGroupTest, CancelThenJoinStopsManyTasks) {
  asio::io_context io;
  TaskGroup group(io.get_executor(), "test");
  int quiet_stopped = 0;
  for (int i = 0; i < 150; ++i) group.spawn("throwing-" + std::to_string(i), sleep_forever_throwing());
  for (int i = 0; i < 150; ++i) group.spawn("quiet-" + std::to_string(i), sleep_forever_quietly(quiet_stopped));
  EXPECT_EQ(group.size(), 300u);
  bool joined = false;
  run_coro(io, [&]() -> asio::awaitable<void> {
    co_await sleep_for(20ms);
    EXPECT_EQ(group.size(), 300u);
    group.cancel();
    joined = co_await group.join_for(20s);
  }());
  EXPECT_TRUE(joined);
  EXPECT_EQ(group.size(), 0u);
  EXPECT_EQ(quiet_stopped, 150);
  // Cancellation is not a failure.
  EXPECT_EQ(logs_.str().find("task failed"), std::string::npos);
}

TEST_F(TaskGroupTest, ChildrenFinishingDuringCancelAreSafe) {
  asio::io_context io;
  TaskGroup group(io.get_executor(), "race");
  int done = 0;
  int stopped = 0;
  for (int i = 0; i < 100; ++i) {
    group.spawn("instant", sleep_then(0ms, done));
    group.spawn("sleeper", sleep_forever_quietly(stopped));
  }
  run_coro(io, [&]() -> asio::awaitable<void> {
    group.cancel();  // before any child has run: all of them see the cancellation
    co_await group.join();
  }());
  EXPECT_EQ(group.size(), 0u);
  EXPECT_EQ(stopped, 100);
  EXPECT_FALSE(group.spawn("late", sleep_then(0ms, done)));
}

TEST_F(TaskGroupTest, JoinForTimesOutWhileChildrenRun) {
  asio::io_context io;
  TaskGroup group(io.get_executor(), "slow");
  int stopped = 0;
  group.spawn("sleeper", sleep_forever_quietly(stopped));
  run_coro(io, [&]() -> asio::awaitable<void> {
    EXPECT_FALSE(co_await group.join_for(50ms));
    EXPECT_EQ(group.size(), 1u);
    group.cancel();
    EXPECT_TRUE(co_await group.join_for(20s));
  }());
  EXPECT_EQ(stopped, 1);
}

TEST_F(TaskGroupTest, ChildExceptionIsLoggedWithNameAndSiblingsContinue) {
  asio::io_context io;
  TaskGroup group(io.get_executor(), "workers");
  int done = 0;
  group.spawn("exploder", []() -> asio::awaitable<void> {
    co_await sleep_for(1ms);
    throw std::runtime_error("kaboom");
  }());
  group.spawn("survivor", sleep_then(100ms, done));
  run_coro(io, group.join());
  EXPECT_EQ(done, 1);
  const auto text = logs_.str();
  EXPECT_NE(text.find("task failed"), std::string::npos) << text;
  EXPECT_NE(text.find("exploder"), std::string::npos) << text;
  EXPECT_NE(text.find("kaboom"), std::string::npos) << text;
}

TEST_F(TaskGroupTest, CapturingLambdaCoroutinesAreKeptAlive) {
  asio::io_context io;
  TaskGroup group(io.get_executor(), "lambdas");
  int sum = 0;
  for (int i = 1; i <= 5; ++i) {
    std::string label = "item-" + std::to_string(i);
    group.spawn(label, [&sum, i, label]() -> asio::awaitable<void> {
      co_await sleep_for(std::chrono::milliseconds(i));
      EXPECT_EQ(label, "item-" + std::to_string(i));  // reads the capture after a suspension
      sum += i;
    });
  }
  run_coro(io, group.join());
  EXPECT_EQ(sum, 15);
}

TEST_F(TaskGroupTest, JoinOnEmptyGroupCompletesAtOnce) {
  asio::io_context io;
  TaskGroup group(io.get_executor(), "empty");
  run_coro(io, group.join(), 5s);
  EXPECT_EQ(group.size(), 0u);
}

TEST_F(TaskGroupTest, DestroyingTheGroupCancelsChildrenWithoutDangling) {
  asio::io_context io;
  int stopped = 0;
  {
    auto group = std::make_unique<TaskGroup>(io.get_executor(), "short-lived");
    for (int i = 0; i < 10; ++i) group->spawn("sleeper", sleep_forever_quietly(stopped));
    io.poll();
  }
  io.run_for(10s);
  EXPECT_EQ(stopped, 10);
}

}  // namespace mooring::async
