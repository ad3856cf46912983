// The session loop against real sockets: limits, keep-alive, errors and graceful shutdown.
#include "services/controlplane/http/server.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <future>
#include <mutex>
#include <tuple>
#include <iostream>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <gtest/gtest.h>

#include "tests/controlplane/support/http_client.hpp"

namespace mooring::controlplane::http {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

// Helpers for the limit tests. Unlike the blocking client in support/, every exchange here has a
// deadline, so a server that never answers fails the test instead of hanging it.
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
using Clock = std::chrono::steady_clock;

long long ms(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

tcp::endpoint server_endpoint(std::uint16_t port) { return {asio::ip::make_address("127.0.0.1"), port}; }

// Opens a socket bound to `local` (another 127.0.0.0/8 address stands for another client).
error_code open_from(tcp::socket& sock, const std::string& local) {
  error_code ec;
  sock.open(tcp::v4(), ec);
  if (!ec) sock.bind({asio::ip::make_address(local), 0}, ec);
  return ec;
}

bool loopback_alias_works() {
  asio::io_context io;
  tcp::socket sock(io);
  return !open_from(sock, "127.0.0.2");
}

struct Reply {
  unsigned status = 0;
  std::string retry_after;
  std::string body;
  std::string error;
};

asio::awaitable<void> exchange_into(Reply& out, std::uint16_t port, std::vector<std::string> parts,
                                    std::chrono::milliseconds pause, std::string local) {
  auto ex = co_await asio::this_coro::executor;
  boost::beast::tcp_stream stream(ex);
  if (auto ec = open_from(stream.socket(), local)) {
    out.error = "bind " + local + ": " + ec.message();
    co_return;
  }
  stream.expires_after(10s);
  auto [cec] = co_await stream.async_connect(server_endpoint(port), tuple_awaitable);
  if (cec) {
    out.error = "connect: " + cec.message();
    co_return;
  }
  asio::steady_timer timer(ex);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      timer.expires_after(pause);
      co_await timer.async_wait(tuple_awaitable);
    }
    auto [wec, wn] = co_await asio::async_write(stream, asio::buffer(parts[i]), tuple_awaitable);
    (void)wn;
    if (wec) {
      out.error = "write: " + wec.message();
      co_return;
    }
  }
  boost::beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  auto [rec, rn] = co_await bhttp::async_read(stream, buffer, res, tuple_awaitable);
  (void)rn;
  if (rec) {
    out.error = "read: " + rec.message();
    co_return;
  }
  out.status = res.result_int();
  out.retry_after = std::string(res[bhttp::field::retry_after]);
  out.body = res.body();
}

// Writes `parts` with `pause` between them and reads one response, all within 10 s.
Reply exchange(std::uint16_t port, std::vector<std::string> parts, std::chrono::milliseconds pause = 0ms,
               const std::string& local = "127.0.0.1") {
  asio::io_context io;
  Reply out;
  asio::co_spawn(io, exchange_into(out, port, std::move(parts), pause, local), [&out](std::exception_ptr e) {
    if (e) out.error = "exception";
  });
  io.run();
  return out;
}

Reply fetch(std::uint16_t port, const std::string& target, const std::string& local = "127.0.0.1") {
  return exchange(port, {"GET " + target + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"}, 0ms, local);
}

asio::awaitable<void> read_until_closed(tcp::socket& sock) {
  std::array<char, 512> scratch;
  for (;;) {
    auto [ec, n] = co_await sock.async_read_some(asio::buffer(scratch), tuple_awaitable);
    (void)n;
    if (ec) co_return;
  }
}

// Sends `bytes` one at a time, `interval` apart: a slowloris. Ends on the first error, which is
// also how cancellation arrives.
asio::awaitable<void> trickle(tcp::socket& sock, std::string bytes, std::chrono::milliseconds interval) {
  asio::steady_timer timer(sock.get_executor());
  for (char c : bytes) {
    auto [ec, n] = co_await asio::async_write(sock, asio::buffer(&c, 1), tuple_awaitable);
    (void)n;
    if (ec) co_return;
    timer.expires_after(interval);
    auto [tec] = co_await timer.async_wait(tuple_awaitable);
    if (tec) co_return;
  }
  timer.expires_after(1h);  // all sent: stay silent
  co_await timer.async_wait(tuple_awaitable);
}

asio::awaitable<void> hold_open(tcp::socket& sock, std::string bytes, std::chrono::milliseconds interval) {
  asio::steady_timer deadline(sock.get_executor(), 10s);
  co_await (read_until_closed(sock) || trickle(sock, std::move(bytes), interval) ||
            deadline.async_wait(tuple_awaitable));
}

// Connects, trickles `bytes` (none: stays silent) and returns how long until the server closed
// the connection (10 s at most).
Clock::duration held_until_closed(std::uint16_t port, std::string bytes, std::chrono::milliseconds interval) {
  asio::io_context io;
  tcp::socket sock(io);
  sock.connect(server_endpoint(port));
  const auto t0 = Clock::now();
  asio::co_spawn(io, hold_open(sock, std::move(bytes), interval), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  return Clock::now() - t0;
}

// Makes room for `want` open files; false when the process may not.
bool ensure_open_files(rlim_t want) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  if (lim.rlim_cur >= want) return true;
  lim.rlim_cur = want;
  if (lim.rlim_max < want) lim.rlim_max = want;  // needs root (CAP_SYS_RESOURCE)
  return setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

// Clients holding connections open without a request in progress, as in the issue, and opening a
// new one whenever the server closes one; plus one slowloris. They run on their own thread.
class Flood {
 public:
  Flood(std::uint16_t port, std::chrono::milliseconds reconnect_pause) : port_(port), reconnect_pause_(reconnect_pause) {}
  ~Flood() { stop(); }
  Flood(const Flood&) = delete;
  Flood& operator=(const Flood&) = delete;

  void start(std::size_t idle, const std::vector<std::string>& addresses, const std::string& slowloris_address) {
    for (std::size_t i = 0; i < idle; ++i) spawn(hold(addresses[i % addresses.size()], i % 2 == 0));
    spawn(slowloris(slowloris_address));
    thread_ = std::thread([this] { io_.run(); });
  }
  void stop() {
    if (!thread_.joinable()) return;
    io_.stop();
    thread_.join();
  }

  std::atomic<std::size_t> connects{0};          // connections opened, in all
  std::atomic<std::size_t> closed_by_server{0};  // idle ones the server closed
  std::atomic<std::size_t> slowloris_closed{0};
  std::atomic<long long> slowloris_longest_ms{0};
  std::atomic<std::size_t> failures{0};

 private:
  void spawn(asio::awaitable<void> a) {
    asio::co_spawn(io_, std::move(a), [this](std::exception_ptr e) {
      if (e) ++failures;
    });
  }

  // Half of them send one request first, so they are kept-alive connections gone idle; the
  // others never send anything.
  asio::awaitable<void> hold(std::string local, bool one_request_first) {
    static const std::string request = "GET /warmup HTTP/1.1\r\nHost: a\r\n\r\n";
    asio::steady_timer pause(io_);
    for (;;) {
      tcp::socket sock(io_);
      if (open_from(sock, local)) {
        ++failures;
        co_return;
      }
      auto [ec] = co_await sock.async_connect(server_endpoint(port_), tuple_awaitable);
      if (!ec) {
        ++connects;
        if (one_request_first) co_await asio::async_write(sock, asio::buffer(request), tuple_awaitable);
        co_await read_until_closed(sock);  // drops the response, then waits
        ++closed_by_server;
      }
      pause.expires_after(reconnect_pause_);
      co_await pause.async_wait(tuple_awaitable);
    }
  }

  asio::awaitable<void> slowloris(std::string local) {
    for (;;) {
      tcp::socket sock(io_);
      if (open_from(sock, local)) {
        ++failures;
        co_return;
      }
      auto [ec] = co_await sock.async_connect(server_endpoint(port_), tuple_awaitable);
      if (ec) co_return;
      const auto t0 = Clock::now();
      co_await (read_until_closed(sock) ||
                trickle(sock, "GET /x HTTP/1.1\r\nHost: a\r\nX-Pad: " + std::string(4000, 'p'), 100ms));
      ++slowloris_closed;
      slowloris_longest_ms = std::max(slowloris_longest_ms.load(), ms(Clock::now() - t0));
    }
  }

  std::uint16_t port_;
  std::chrono::milliseconds reconnect_pause_;
  asio::io_context io_;
  std::thread thread_;
};

}  // namespace

class ServerTest : public ::testing::Test {
 protected:
  void start(ServerConfig config = {}) {
    config.port = 0;
    config.refused = [this](const Request& r, const Response& res) {
      std::lock_guard lock(refused_mutex);
      refused.push_back({r.method, r.path, r.target, r.remote, res.status});
    };
    server = std::make_unique<Server>(io.get_executor(), config, [this](Request r) { return handle(std::move(r)); });
    ASSERT_FALSE(server->listen());
    server->start();
    port = server->port();
    thread = std::thread([this] { io.run(); });
  }

  void TearDown() override {
    if (thread.joinable()) {
      if (!stopped) stop(100ms);
      thread.join();
    }
    server.reset();
  }

  void stop(std::chrono::milliseconds grace) {
    auto f = asio::co_spawn(io, server->shutdown(grace), asio::use_future);
    f.get();
    stopped = true;
  }

  asio::awaitable<Response> handle(Request r) {
    if (r.path == "/throw") throw std::runtime_error("boom");
    if (r.path == "/slow" || r.path == "/hang") {
      asio::steady_timer t(io, r.path == "/slow" ? std::chrono::milliseconds(400) : std::chrono::milliseconds(3'600'000));
      ++waiting;
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      co_return json_response(R"({"slow":true})");
    }
    Response res = json_response(R"({"method":")" + r.method + R"(","size":)" + std::to_string(r.body.size()) + "}");
    res.index = 42;
    co_return res;
  }

  asio::io_context io;
  std::unique_ptr<Server> server;
  std::thread thread;
  std::uint16_t port = 0;
  std::atomic<int> waiting{0};
  bool stopped = false;
  struct Reported {
    std::string method, path, target, remote;
    unsigned status;
  };
  std::mutex refused_mutex;
  std::vector<Reported> refused;  // what config.refused was told
};

TEST_F(ServerTest, AnswersWithHandlerResponseAndIndexHeaders) {
  start();
  auto r = http_request(port, "GET", "/v1/anything");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, R"({"method":"GET","size":0})");
  EXPECT_EQ(r.header("x-mooring-index"), "42");
  EXPECT_EQ(r.header("x-nomad-index"), "42");
  EXPECT_EQ(r.header("content-type"), "application/json");
}

TEST_F(ServerTest, HeadSendsLengthButNoBody) {
  start();
  HttpConnection c(port);
  auto r = c.request("HEAD", "/x");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.header("content-length"), "26");  // {"method":"HEAD","size":0}
  EXPECT_TRUE(r.body.empty());
}

TEST_F(ServerTest, KeepsConnectionsAlive) {
  start();
  HttpConnection c(port);
  for (int i = 0; i < 3; ++i) {
    auto r = c.request("PUT", "/x", "hello");
    EXPECT_EQ(r.status, 200u) << r.error;
    EXPECT_EQ(r.body, R"({"method":"PUT","size":5})");
  }
}

TEST_F(ServerTest, RejectsTooLargeBodyWith413) {
  ServerConfig cfg;
  cfg.body_limit = 1000;
  start(cfg);
  auto r = http_request(port, "PUT", "/x", std::string(5000, 'a'));
  EXPECT_EQ(r.status, 413u) << r.error;
  EXPECT_NE(r.body.find("\"Error\""), std::string::npos);
}

TEST_F(ServerTest, RejectsTooLargeChunkedBodyWith413) {
  ServerConfig cfg;
  cfg.body_limit = 1000;
  start(cfg);
  HttpConnection c(port);
  std::string chunk(1500, 'b');
  char size_hex[16];
  std::snprintf(size_hex, sizeof size_hex, "%zx", chunk.size());
  auto r = c.raw("PUT /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(size_hex) +
                 "\r\n" + chunk + "\r\n0\r\n\r\n");
  EXPECT_EQ(r.status, 413u) << r.error;
}

TEST_F(ServerTest, RejectsHugeHeadersWith431) {
  ServerConfig cfg;
  cfg.header_limit = 2048;
  start(cfg);
  auto r = http_request(port, "GET", "/x", {}, {{"X-Big", std::string(4096, 'h')}});
  EXPECT_EQ(r.status, 431u) << r.error;
}

TEST_F(ServerTest, MalformedRequestGets400) {
  start();
  HttpConnection c(port);
  auto r = c.raw("GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: zz\r\n\r\n");
  EXPECT_EQ(r.status, 400u) << r.error;
}

TEST_F(ServerTest, HandlerExceptionBecomes500) {
  start();
  auto r = http_request(port, "GET", "/throw");
  EXPECT_EQ(r.status, 500u);
  EXPECT_EQ(r.body, R"({"Error":"internal error"})");
}

// For the audit log: what the server answered itself, with what it could read of the request
// (never its query), and nothing about what the handler answered.
TEST_F(ServerTest, RequestsTheServerAnswersItselfAreReported) {
  ServerConfig cfg;
  cfg.body_limit = 1000;
  cfg.header_limit = 2048;
  start(cfg);
  EXPECT_EQ(http_request(port, "PUT", "/big?token=s3cret", std::string(5000, 'a')).status, 413u);
  EXPECT_EQ(http_request(port, "POST", "/headers?token=s3cret", {}, {{"X-Big", std::string(4096, 'h')}}).status, 431u);
  EXPECT_EQ(HttpConnection(port).raw("DELETE /bad?token=s3cret HTTP/1.1\r\nHost: a\r\nContent-Length: zz\r\n\r\n").status,
            400u);
  EXPECT_EQ(HttpConnection(port).raw("\x01garbage\r\n\r\n").status, 400u);
  EXPECT_EQ(HttpConnection(port).raw("POST /te HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n").status, 501u);
  EXPECT_EQ(http_request(port, "POST", "/throw?token=s3cret").status, 500u);
  EXPECT_EQ(http_request(port, "PUT", "/fine", "x").status, 200u);
  std::lock_guard lock(refused_mutex);
  ASSERT_EQ(refused.size(), 6u);
  const std::vector<std::tuple<std::string, std::string, unsigned>> want{
      {"PUT", "/big", 413}, {"POST", "/headers", 431}, {"DELETE", "/bad", 400},
      {"", "", 400},        {"POST", "/te", 501},      {"POST", "/throw", 500}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::tie(refused[i].method, refused[i].path, refused[i].status), want[i]) << i;
    EXPECT_EQ(refused[i].target, refused[i].path) << i;  // the query is dropped
    EXPECT_TRUE(refused[i].remote.starts_with("127.0.0.1:")) << refused[i].remote;
  }
}

TEST_F(ServerTest, ExpectContinueIsHonoured) {
  start();
  HttpConnection c(port);
  auto r = c.request("PUT", "/x", std::string(2000, 'c'), {{"Expect", "100-continue"}});
  // The client reads the interim 100 first; Beast's parser skips it only for the raw variant,
  // so accept either the 100 or the final answer here and then check the final answer arrives.
  if (r.status == 100) r = c.raw("");
  EXPECT_EQ(r.status, 200u) << r.error;
  EXPECT_EQ(r.body, R"({"method":"PUT","size":2000})");
}

TEST_F(ServerTest, ConnectionsOverTheLimitGet503WhenNoneIsIdle) {
  ServerConfig cfg;
  cfg.max_connections = 2;
  start(cfg);
  auto a = std::async(std::launch::async, [&] { return fetch(port, "/hang"); });
  auto b = std::async(std::launch::async, [&] { return fetch(port, "/hang"); });
  while (waiting.load() < 2) std::this_thread::sleep_for(5ms);
  auto r = fetch(port, "/c");
  EXPECT_EQ(r.status, 503u) << r.error;
  EXPECT_EQ(r.retry_after, "1");
  EXPECT_EQ(r.body, R"({"Error":"too many connections (server limit 2); retry later"})");
  stop(100ms);  // ends the hanging requests
}

TEST_F(ServerTest, PerClientLimitAnswers503WithRetryAfter) {
  ServerConfig cfg;
  cfg.max_connections_per_client = 2;
  start(cfg);
  auto a = std::async(std::launch::async, [&] { return fetch(port, "/hang"); });
  auto b = std::async(std::launch::async, [&] { return fetch(port, "/hang"); });
  while (waiting.load() < 2) std::this_thread::sleep_for(5ms);
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(port, "/c");
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.status, 503u) << r.error;
  EXPECT_EQ(r.retry_after, "1");
  EXPECT_EQ(r.body, R"({"Error":"too many connections from 127.0.0.1 (per-client limit 2); retry later"})");
  EXPECT_LT(elapsed, 2s);  // answered at once, not after a timeout
  if (loopback_alias_works()) {
    auto other = fetch(port, "/d", "127.0.0.2");  // another client is not affected
    EXPECT_EQ(other.status, 200u) << other.error;
  }
  stop(100ms);
}

TEST_F(ServerTest, IdleConnectionsGiveWayToNewOnesAtTheLimit) {
  ServerConfig cfg;
  cfg.max_connections = 2;
  start(cfg);
  HttpConnection a(port), b(port);
  ASSERT_EQ(a.request("GET", "/a").status, 200u);
  ASSERT_EQ(b.request("GET", "/b").status, 200u);
  auto r = fetch(port, "/c");
  EXPECT_EQ(r.status, 200u) << r.error;
  EXPECT_EQ(a.request("GET", "/a").status, 0u);  // the oldest idle one was closed
  EXPECT_EQ(b.request("GET", "/b").status, 200u);
}

TEST_F(ServerTest, SlowlorisAndSilentConnectionsAreClosedAfterTheHeaderTimeout) {
  ServerConfig cfg;
  cfg.header_timeout = 300ms;  // read_timeout stays 30 s
  start(cfg);
  auto trickled = held_until_closed(port, "GET /x HTTP/1.1\r\nHost: a\r\nX-Pad: " + std::string(500, 'p'), 20ms);
  auto silent = held_until_closed(port, "", 20ms);
  std::cout << "slowloris held " << ms(trickled) << " ms, silent connection " << ms(silent) << " ms\n";
  EXPECT_GE(trickled, 250ms);
  EXPECT_LT(trickled, 3s);
  EXPECT_GE(silent, 250ms);
  EXPECT_LT(silent, 3s);
}

TEST_F(ServerTest, HeaderTimeoutLeavesKeepAliveIdleAndBodiesTheLongerTimeout) {
  ServerConfig cfg;
  cfg.header_timeout = 200ms;
  cfg.read_timeout = 5s;
  start(cfg);
  HttpConnection c(port);
  ASSERT_EQ(c.request("GET", "/a").status, 200u);
  std::this_thread::sleep_for(500ms);  // idle between requests: read_timeout applies
  EXPECT_EQ(c.request("GET", "/b").status, 200u);
  auto r = exchange(port, {"PUT /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 4\r\n\r\nab", "cd"},
                    500ms);
  EXPECT_EQ(r.status, 200u) << r.error;
  EXPECT_EQ(r.body, R"({"method":"PUT","size":4})");
}

TEST_F(ServerTest, IdleConnectionIsClosedAfterReadTimeout) {
  ServerConfig cfg;
  cfg.read_timeout = 200ms;
  start(cfg);
  HttpConnection c(port);
  ASSERT_EQ(c.request("GET", "/a").status, 200u);
  std::this_thread::sleep_for(600ms);
  auto r = c.request("GET", "/b");
  EXPECT_EQ(r.status, 0u);  // the server closed the connection
}

TEST_F(ServerTest, ShutdownLetsInFlightRequestFinishAndClosesIdleOnes) {
  start();
  HttpConnection idle(port);
  ASSERT_EQ(idle.request("GET", "/a").status, 200u);
  auto slow = std::async(std::launch::async, [&] { return http_request(port, "GET", "/slow"); });
  while (waiting.load() == 0) std::this_thread::sleep_for(5ms);
  auto t0 = std::chrono::steady_clock::now();
  stop(10s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  auto r = slow.get();
  EXPECT_EQ(r.status, 200u) << r.error;
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_EQ(idle.request("GET", "/b").status, 0u);
  EXPECT_NE(http_request(port, "GET", "/c").status, 200u);  // no longer accepting
}

TEST_F(ServerTest, ShutdownAnswersARequestThatHadAlreadyArrived) {
  start();
  HttpConnection c(port);
  ASSERT_TRUE(c.open());
  for (int i = 0; i < 400 && server->connections() == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server->connections(), 1u);
  // Hold the server's thread while the request lands in its socket, then begin the shutdown
  // before the server has read a byte of it: the client must get its answer, not a reset.
  std::promise<void> held, release;
  asio::post(io, [&] {
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();
  auto reply = std::async(std::launch::async, [&] { return c.raw("GET /a HTTP/1.1\r\nHost: a\r\n\r\n"); });
  std::this_thread::sleep_for(100ms);
  auto done = asio::co_spawn(io, server->shutdown(5s), asio::use_future);
  release.set_value();
  done.get();
  stopped = true;
  auto r = reply.get();
  EXPECT_EQ(r.status, 200u) << r.error;
  EXPECT_EQ(r.header("connection"), "close");
}

TEST_F(ServerTest, ShutdownClosesRequestsStillRunningAfterGrace) {
  start();
  auto hang = std::async(std::launch::async, [&] { return http_request(port, "GET", "/hang"); });
  while (waiting.load() == 0) std::this_thread::sleep_for(5ms);
  auto t0 = std::chrono::steady_clock::now();
  stop(200ms);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(elapsed, 150ms);
  EXPECT_LT(elapsed, 10s);
  auto r = hang.get();
  EXPECT_NE(r.status, 200u);
  EXPECT_EQ(server->connections(), 0u);
}

TEST_F(ServerTest, IdleFloodAndSlowlorisDoNotStarveRequests) {
  if (!ensure_open_files(8192)) GTEST_SKIP() << "cannot raise RLIMIT_NOFILE to 8192 for 1,000 connections";
  if (!loopback_alias_works()) GTEST_SKIP() << "cannot bind 127.0.0.2 to stand for other clients";
  ServerConfig cfg;
  // Half the flood, so it is over the global limit and idle connections must give way. The flood
  // comes from four addresses, 250 each, so the per-client limit (256) is not what helps here.
  cfg.max_connections = 512;
  start(cfg);
  // A closed connection is reopened after a second: connections held open as in the issue, with
  // about 490 of them evicted and reopened every second. Reopening faster turns it into a connect
  // flood, which measures how fast a sanitizer build accepts (FIFO) rather than the limits: with
  // 250 ms (2,000 reconnects/s) p99 was 0.1-0.6 s on a loaded 2-core machine, yet every request
  // still succeeded.
  Flood flood(port, 1s);
  flood.start(1000, {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}, "127.0.0.6");
  const auto setup_deadline = Clock::now() + 30s;
  while ((flood.connects < 1000 || flood.closed_by_server == 0) && Clock::now() < setup_deadline)
    std::this_thread::sleep_for(10ms);
  ASSERT_GE(flood.connects.load(), 1000u) << "the flood did not connect";
  ASSERT_GT(flood.closed_by_server.load(), 0u) << "the server never needed to close an idle connection";

  // Requests one after another for a few seconds, so they meet several waves of reconnects.
  std::vector<Clock::duration> latencies;
  int ok = 0;
  const auto measure_until = Clock::now() + 3s;
  for (int i = 0; i < 100 || Clock::now() < measure_until; ++i) {
    const auto t0 = Clock::now();
    auto r = fetch(port, "/v1/anything");
    latencies.push_back(Clock::now() - t0);
    if (r.status == 200) {
      ++ok;
    } else {
      ADD_FAILURE() << "request " << i << ": status " << r.status << " " << r.error << " " << r.body;
      if (latencies.size() - ok >= 10) break;
    }
  }
  const int requests = static_cast<int>(latencies.size());
  std::sort(latencies.begin(), latencies.end());
  const auto p50 = latencies[latencies.size() / 2];
  const auto p99 = latencies[latencies.size() * 99 / 100];
  std::cout << "under a flood of 1000 idle connections and a slowloris: " << ok << "/" << requests
            << " requests ok, p50 " << ms(p50) << " ms, p99 " << ms(p99) << " ms, max " << ms(latencies.back())
            << " ms; flood connections opened " << flood.connects << ", idle ones closed by the server "
            << flood.closed_by_server << ", slowloris closed " << flood.slowloris_closed << "\n";
  EXPECT_EQ(ok, requests);
  // The target is 100 ms; the bound leaves room for ASan on a loaded 2-core machine.
  EXPECT_LT(p99, 1s);
  EXPECT_EQ(flood.failures.load(), 0u);
  flood.stop();
}

}  // namespace mooring::controlplane::http
