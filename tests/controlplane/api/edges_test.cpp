// The HTTP and input edges of the REST API over real sockets, plain and TLS: a request whose body
// framing is ambiguous is refused and its connection closed, so nothing after it is read as a
// second request (the smuggling shape); invalid UTF-8 in a path, query, header or JSON body and
// NUL bytes or bad variable names in what reaches a process are 400s naming the field that
// change nothing; the Origin must match scheme, host and port; every answer says nosniff, and
// HTTPS ones carry HSTS.
#include <array>
#include <regex>
#include <sstream>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/fixtures.hpp"
#include "tests/controlplane/support/http_client.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"

namespace mooring::controlplane {

namespace asio = boost::asio;
using json = nlohmann::json;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// What came back on one connection: every byte until the server closed it, or until 5 s passed.
struct Raw {
  std::string received;
  bool closed = false;  // the server ended the connection (not our deadline)
  std::string error;    // connect, handshake or write failed

  // The status of every response in `received`, in order.
  std::vector<unsigned> statuses() const {
    static const std::regex status_line(R"(HTTP/1\.[01] (\d{3}) )");
    std::vector<unsigned> out;
    for (auto it = std::sregex_iterator(received.begin(), received.end(), status_line); it != std::sregex_iterator(); ++it)
      out.push_back(static_cast<unsigned>(std::stoul((*it)[1])));
    return out;
  }
  // A header of the first response (name lower-case), or "".
  std::string header(const std::string& lower) const {
    const auto head = received.substr(0, received.find("\r\n\r\n"));
    std::istringstream lines(head);
    for (std::string line; std::getline(lines, line);) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (name == lower) return line.substr(colon + 2, line.size() - colon - 3);  // without ": " and "\r"
    }
    return {};
  }
  std::string body() const {
    const auto at = received.find("\r\n\r\n");
    return at == std::string::npos ? std::string{} : received.substr(at + 4);
  }
};

template <class Stream>
asio::awaitable<void> send_and_read(Stream& stream, const std::string& bytes, Raw& out) {
  auto [wec, wn] = co_await asio::async_write(stream, asio::buffer(bytes), tuple_awaitable);
  (void)wn;
  if (wec) {
    out.error = "write: " + wec.message();
    co_return;
  }
  std::array<char, 4096> buf;
  for (;;) {
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(buf), tuple_awaitable);
    out.received.append(buf.data(), n);
    if (ec) break;  // end of stream, a TLS stream cut short or a reset: the server closed it
  }
  out.closed = true;
}

asio::awaitable<void> exchange(std::uint16_t port, std::string bytes, std::string ca, Raw& out) {
  tcp::socket socket(co_await asio::this_coro::executor);
  auto [cec] = co_await socket.async_connect({asio::ip::make_address("127.0.0.1"), port}, tuple_awaitable);
  if (cec) {
    out.error = "connect: " + cec.message();
    co_return;
  }
  if (ca.empty()) {
    co_await send_and_read(socket, bytes, out);
    co_return;
  }
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  ctx.load_verify_file(ca);
  asio::ssl::stream<tcp::socket&> tls(socket, ctx);
  tls.set_verify_mode(asio::ssl::verify_peer);
  auto [hec] = co_await tls.async_handshake(asio::ssl::stream_base::client, tuple_awaitable);
  if (hec) {
    out.error = "handshake: " + hec.message();
    co_return;
  }
  co_await send_and_read(tls, bytes, out);
}

// Sends `bytes` on a new connection (TLS trusting `ca` when given) and reads until it closes.
Raw raw_exchange(std::uint16_t port, const std::string& bytes, const std::string& ca = {}) {
  asio::io_context io;
  Raw out;
  asio::co_spawn(io, exchange(port, bytes, ca, out), asio::detached);
  io.run_for(5s);
  return out;
}

// A request whose body is framed by `framing` (header lines), followed by a second request that
// must never be answered.
std::string smuggling(const std::string& framing, const std::string& body = "0\r\n\r\n",
                      const std::string& version = "HTTP/1.1") {
  return "POST /v1/allocations " + version + "\r\nHost: 127.0.0.1\r\n" + framing + "\r\n\r\n" + body +
         "GET /v1/status/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
}

}  // namespace

class Edges : public ::testing::Test {
 protected:
  void SetUp() override {
    Batch b;
    b.put(fixtures::ready_node(fixtures::plugin("hostpath", "node-1", true), "node-1"));
    b.put(fixtures::volume("vol-1"));
    plain.seed(b);
    secure.seed(std::move(b));
    plain.start();
    http::ServerConfig config;
    auto files = pki.server();
    ca = files.ca;
    config.tls = {.cert_file = files.cert, .key_file = files.key};
    secure.start(config);
  }

  std::pair<std::uint64_t, std::size_t> fingerprint(ApiServer& server) {
    server.settle();
    return server.on_io([&] { return std::make_pair(server.store.index(), server.backend.transactions.size()); });
  }

  test::TempDir dir{"mooring-edges"};
  test::TestPki pki{dir / "pki"};
  std::string ca;
  ApiServer plain;
  ApiServer secure;
};

TEST_F(Edges, AmbiguousBodyFramingIsRefusedAndTheConnectionClosedBeforeAnythingElseIsRead) {
  struct Case {
    std::string framing;
    unsigned status;
    std::string error;  // a part of the answer's Error
    std::string version = "HTTP/1.1";
  };
  const std::vector<Case> cases{
      {"Transfer-Encoding: xchunked", 501, "Transfer-Encoding \\\"xchunked\\\" is not supported"},
      {"Transfer-Encoding: gzip", 501, "Transfer-Encoding \\\"gzip\\\" is not supported"},
      {"Transfer-Encoding: chunked, identity", 501, "\\\"identity\\\" is not supported"},
      {"Transfer-Encoding: gzip, chunked", 501, "\\\"gzip\\\" is not supported"},
      {"Transfer-Encoding: chunked, chunked", 400, "\\\"chunked\\\" exactly once, got 2"},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", 400, "malformed request"},
      {"Transfer-Encoding: ", 400, "exactly once, got 0"},
      {"Transfer-Encoding: gzip\r\nContent-Length: 5", 501, "\\\"gzip\\\" is not supported"},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked", 400, "malformed request"},
      {"Transfer-Encoding: chunked\r\nContent-Length: 5", 400, "malformed request"},
      {"Content-Length: 5\r\nContent-Length: 6", 400, "Content-Length given twice"},
      {"Transfer-Encoding: chunked", 400, "not allowed in an HTTP/1.0 request", "HTTP/1.0"},
  };
  const auto before = std::make_pair(fingerprint(plain), fingerprint(secure));
  for (const bool tls : {false, true}) {
    for (const auto& c : cases) {
      const auto r = raw_exchange(tls ? secure.port : plain.port, smuggling(c.framing, "0\r\n\r\n", c.version),
                                  tls ? ca : std::string{});
      const std::string what = (tls ? "https: " : "http: ") + c.framing;
      ASSERT_TRUE(r.error.empty()) << what << ": " << r.error;
      EXPECT_EQ(r.statuses(), std::vector<unsigned>{c.status}) << what << "\n" << r.received;  // one answer only
      EXPECT_NE(r.body().find(c.error), std::string::npos) << what << "\n" << r.body();
      EXPECT_EQ(r.header("connection"), "close") << what;
      EXPECT_TRUE(r.closed) << what << ": the connection was left open";
    }
  }
  EXPECT_EQ(std::make_pair(fingerprint(plain), fingerprint(secure)), before);
  // One chunked body is read as such; the next request on the connection is answered in turn.
  const auto ok = raw_exchange(plain.port, smuggling("Transfer-Encoding: chunked", "2\r\n{}\r\n0\r\n\r\n"));
  EXPECT_EQ(ok.statuses(), (std::vector<unsigned>{400, 200})) << ok.received;
  EXPECT_NE(ok.body().find("field \\\"Allocation\\\": required"), std::string::npos) << ok.received;
}

TEST_F(Edges, EveryAnswerSaysNosniffAndHttpsAnswersCarryHsts) {
  const std::vector<std::string> requests{
      "GET /v1/status/health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",   // 200
      "GET /v1/nope HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",            // 404 from the API
      "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: zz\r\n\r\n",                  // 400 from the server
      "PUT /v1/volumes HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",  // 501 from the server
  };
  for (const bool tls : {false, true}) {
    for (const auto& request : requests) {
      const auto r = raw_exchange(tls ? secure.port : plain.port, request, tls ? ca : std::string{});
      const auto what = (tls ? "https: " : "http: ") + request.substr(0, request.find('\r'));
      ASSERT_FALSE(r.statuses().empty()) << what << ": " << r.error;
      EXPECT_EQ(r.header("x-content-type-options"), "nosniff") << what;
      EXPECT_EQ(r.header("strict-transport-security"), tls ? "max-age=31536000" : "") << what;
    }
  }
}

TEST_F(Edges, TheOriginOfAWriteMustMatchSchemeHostAndPort) {
  auto write_from = [&](bool tls, const std::string& origin) {
    const auto port = std::to_string(tls ? secure.port : plain.port);
    const auto r = raw_exchange(tls ? secure.port : plain.port,
                                "DELETE /v1/volume/csi/no-such HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\nOrigin: " +
                                    origin + "\r\nConnection: close\r\n\r\n",
                                tls ? ca : std::string{});
    return r.statuses().empty() ? 0u : r.statuses().front();
  };
  const auto secure_port = std::to_string(secure.port), plain_port = std::to_string(plain.port);
  // The server's own pages: the write reaches the endpoint (a 404: no such volume).
  EXPECT_EQ(write_from(true, "https://127.0.0.1:" + secure_port), 404u);
  EXPECT_EQ(write_from(false, "http://127.0.0.1:" + plain_port), 404u);
  // A plain-HTTP page with the same host and port is another origin than the HTTPS port.
  EXPECT_EQ(write_from(true, "http://127.0.0.1:" + secure_port), 403u);
  EXPECT_EQ(write_from(false, "https://127.0.0.1:" + plain_port), 403u);
  EXPECT_EQ(write_from(true, "https://127.0.0.1"), 403u);  // port 443
  EXPECT_EQ(write_from(true, "https://127.0.0.1:1" + secure_port), 403u);
}

TEST_F(Edges, InvalidTextIsRefusedNamingTheFieldAndChangesNothing) {
  const auto task = [](const json& edit) {
    json t = {{"Command", "/bin/true"}, {"Args", {"a"}}, {"Env", {{"A", "b"}}}};
    t.update(edit);
    return json{{"Allocation", {{"Name", "web"}, {"Task", t}}}}.dump();
  };
  struct Case {
    std::string method, target, body;
    std::map<std::string, std::string> headers;
    std::string error;  // the whole Error
  };
  const std::vector<Case> cases{
      {"PUT", "/v1/acl/policy/%ff%fe", R"({"Rules":{}})", {}, "path parameter \"name\": not valid UTF-8"},
      {"GET", "/v1/volume/csi/%c0%af", "", {}, "path parameter \"id\": not valid UTF-8"},
      {"GET", "/v1/volumes?prefix=%ed%a0%80", "", {}, "query parameter \"prefix\": not valid UTF-8"},
      {"DELETE", "/v1/volume/csi/vol-1?%ff=1", "", {}, "a query parameter's name is not valid UTF-8"},
      {"PUT", "/v1/volume/csi/vol-2", "{\"Volumes\":[{\"ID\":\"vol-2\",\"Name\":\"\xff\"}]}", {},
       "request body: field \"Volumes[0].Name\": not valid UTF-8"},
      {"PUT", "/v1/volume/csi/vol-2", "{\"Volumes\":[{\"ID\":\"vol-2\",\"\xc3\x28\":1}]}", {},
       "request body: a key in field \"Volumes[0]\" is not valid UTF-8"},
      {"POST", "/v1/allocations", R"({"Allocation":{"Name":"web","Task":{"Command":"/bin/true","Env":{"A":")" "\xe2\x82\"}}}}",
       {}, "request body: field \"Allocation.Task.Env.A\": not valid UTF-8"},
      {"POST", "/v1/volumes/snapshot", R"({"Snapshots":[{"SourceVolumeID":"vol-1","Name":"s"}]})",
       {{"X-Mooring-CSI-Secrets", "token=\xff"}}, "header X-Mooring-CSI-Secrets: entry 1 is not valid UTF-8"},
      {"POST", "/v1/allocations", task({{"Env", {{"A=B", "x"}}}}), {},
       "allocation \"web\": field \"Task.Env\": variable name \"A=B\" must not contain \"=\""},
      {"POST", "/v1/allocations", task({{"SecretEnv", {{"", "x"}}}}), {},
       "allocation \"web\": field \"Task.SecretEnv\": a variable name must not be empty"},
      {"POST", "/v1/allocations", task({{"Args", {std::string("a\0b", 3)}}}), {},
       "allocation \"web\": field \"Task.Args[0]\": must not contain a NUL byte"},
      {"POST", "/v1/allocations", task({{"Env", {{"A", std::string("\0", 1)}}}}), {},
       "allocation \"web\": field \"Task.Env.A\": must not contain a NUL byte"},
      {"POST", "/v1/volumes/snapshot",
       json{{"Snapshots", {{{"SourceVolumeID", "vol-1"}, {"Name", std::string("s\0", 2)}}}}}.dump(), {},
       "snapshot: field \"Name\": must not contain a NUL byte"},
  };
  const auto before = fingerprint(plain);
  for (const auto& c : cases) {
    const auto r = http_request(plain.port, c.method, c.target, c.body, c.headers);
    EXPECT_EQ(r.status, 400u) << c.method << " " << c.target << ": " << r.body;
    EXPECT_EQ(json::parse(r.body, nullptr, false).value("Error", ""), c.error) << c.method << " " << c.target;
  }
  EXPECT_EQ(fingerprint(plain), before);
  EXPECT_TRUE(plain.on_io([this] { return plain.controller.snapshots.requests.empty(); }));  // no plugin was asked
}

}  // namespace mooring::controlplane
