// The session loop against real sockets: limits, keep-alive, errors and graceful shutdown.
#include "services/controlplane/http/server.hpp"

#include <future>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include "tests/controlplane/support/http_client.hpp"

namespace mooring::controlplane::http {

namespace asio = boost::asio;
using namespace std::chrono_literals;

class ServerTest : public ::testing::Test {
 protected:
  void start(ServerConfig config = {}) {
    config.port = 0;
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

TEST_F(ServerTest, ConnectionsOverTheLimitGet503) {
  ServerConfig cfg;
  cfg.max_connections = 2;
  start(cfg);
  HttpConnection a(port), b(port);
  ASSERT_EQ(a.request("GET", "/a").status, 200u);
  ASSERT_EQ(b.request("GET", "/b").status, 200u);
  auto r = http_request(port, "GET", "/c");
  EXPECT_EQ(r.status, 503u) << r.error;
  EXPECT_EQ(r.header("retry-after"), "1");
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

}  // namespace mooring::controlplane::http
