#include "services/nodeagent/process/child_process.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

namespace mooring::nodeagent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

struct Lines {
  std::vector<std::string> out, err;
  LineSink sink() {
    return [this](OutputStream s, std::string_view line) {
      (s == OutputStream::out ? out : err).emplace_back(line);
    };
  }
};

// Runs `body` as a coroutine to completion on a fresh io_context.
// Coroutine lambdas must not capture (the closure dies before the frame): state is passed in.
asio::awaitable<void> store_run(std::shared_ptr<ChildProcess> p, std::optional<ExitStatus>& out) {
  out = co_await p->run();
}
asio::awaitable<void> store_wait(std::shared_ptr<ChildProcess> p, std::optional<ExitStatus>& out) {
  out = co_await p->wait();
}

template <class F>
void run(F body) {
  asio::io_context io;
  auto fut = asio::co_spawn(io, body(io.get_executor()), asio::use_future);
  io.run_for(30s);
  ASSERT_EQ(fut.wait_for(0s), std::future_status::ready) << "coroutine did not finish";
  fut.get();
}

TEST(ChildProcess, ForwardsOutputLineByLineAndReportsTheExitCode) {
  Lines lines;
  run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    ProcessSpec spec{"t", "/bin/sh", {"-c", "echo one; echo two; echo oops >&2; printf tail; exit 3"}, {}};
    auto p = ChildProcess::spawn(ex, spec, lines.sink());
    EXPECT_TRUE(p.has_value());
    if (!p) co_return;
    const auto st = co_await (*p)->run();
    EXPECT_EQ(st.exit_code, 3);
    EXPECT_EQ(st.signal, 0);
    EXPECT_FALSE(st.success());
    EXPECT_EQ(st.describe(), "exited with code 3");
    EXPECT_FALSE((*p)->running());
  });
  EXPECT_EQ(lines.out, (std::vector<std::string>{"one", "two", "tail"}));
  EXPECT_EQ(lines.err, (std::vector<std::string>{"oops"}));
}

TEST(ChildProcess, PassesEnvironmentAndArgs) {
  Lines lines;
  run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    ProcessSpec spec{"t", "sh", {"-c", "echo \"$GREETING $0\"", "arg0"}, {{"GREETING", "hello"}}};
    auto p = ChildProcess::spawn(ex, spec, lines.sink());
    EXPECT_TRUE(p.has_value());
    if (!p) co_return;
    EXPECT_TRUE((co_await (*p)->run()).success());
  });
  EXPECT_EQ(lines.out, (std::vector<std::string>{"hello arg0"}));
}

TEST(ChildProcess, MissingCommandIsAnErrorValue) {
  asio::io_context io;
  auto p = ChildProcess::spawn(io.get_executor(), ProcessSpec{"t", "/nonexistent/mooring-binary"}, {});
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().value(), ENOENT);
}

TEST(ChildProcess, StopSendsSigtermAndWaitersSeeTheExit) {
  std::optional<ExitStatus> from_run, from_wait;  // outlive the detached coroutines
  run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    auto p = ChildProcess::spawn(ex, ProcessSpec{"t", "/bin/sleep", {"60"}}, {});
    EXPECT_TRUE(p.has_value());
    if (!p) co_return;
    auto proc = *p;
    asio::co_spawn(ex, store_run(proc, from_run), asio::detached);
    asio::co_spawn(ex, store_wait(proc, from_wait), asio::detached);
    const auto st = co_await proc->stop(10s);
    EXPECT_EQ(st.signal, SIGTERM);
    asio::steady_timer t(ex, 50ms);
    co_await t.async_wait(asio::use_awaitable);
    EXPECT_TRUE(from_run && from_wait);
    if (!from_run || !from_wait) co_return;
    EXPECT_EQ(from_wait->signal, SIGTERM);
    EXPECT_EQ(from_run->signal, SIGTERM);
  });
}

TEST(ChildProcess, StopEscalatesToSigkillWhenSigtermIsIgnored) {
  Lines lines;
  std::optional<ExitStatus> ignored;
  run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    ProcessSpec spec{"t", "/bin/sh", {"-c", "trap '' TERM; echo ready; while true; do sleep 0.05; done"}};
    auto p = ChildProcess::spawn(ex, spec, lines.sink());
    EXPECT_TRUE(p.has_value());
    if (!p) co_return;
    auto proc = *p;
    asio::co_spawn(ex, store_run(proc, ignored), asio::detached);
    while (lines.out.empty()) {
      asio::steady_timer t(ex, 20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    const auto started = std::chrono::steady_clock::now();
    const auto st = co_await proc->stop(300ms);
    EXPECT_EQ(st.signal, SIGKILL);
    EXPECT_EQ(st.describe(), "killed by signal 9 (SIGKILL)");
    EXPECT_GE(std::chrono::steady_clock::now() - started, 300ms);
  });
}

TEST(ChildProcess, ExitIsObservedEvenWhenAGrandchildKeepsThePipesOpen) {
  run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    // The shell exits at once; its background sleep inherits stdout. run() must still finish.
    auto p = ChildProcess::spawn(ex, ProcessSpec{"t", "/bin/sh", {"-c", "sleep 30 & exit 0"}}, {});
    EXPECT_TRUE(p.has_value());
    if (!p) co_return;
    const auto started = std::chrono::steady_clock::now();
    EXPECT_TRUE((co_await (*p)->run()).success());
    EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  });
}

TEST(ChildProcess, DestroyingARunningProcessKillsIt) {
  asio::io_context io;
  pid_t pid = 0;
  {
    auto p = ChildProcess::spawn(io.get_executor(), ProcessSpec{"t", "/bin/sleep", {"60"}}, {});
    ASSERT_TRUE(p.has_value());
    pid = (*p)->pid();
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  EXPECT_NE(::kill(pid, 0), 0);  // reaped, not a zombie
}

}  // namespace
}  // namespace mooring::nodeagent
