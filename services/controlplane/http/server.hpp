// HTTP room: the Beast session loop. It owns sockets, limits, timeouts and the framing of requests
// and answers, and nothing else; every request is handed to a Handler as plain values
// (message.hpp), so the API layer has no I/O. A request whose framing is ambiguous (a
// Transfer-Encoding other than one "chunked", or beside a Content-Length) is refused and its
// connection closed: read another way by a proxy in front, its body would be a second request.
// Every answer carries X-Content-Type-Options: nosniff, and over HTTPS Strict-Transport-Security.
// The server and its handler run on one single-threaded executor (the control plane's io thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include "services/controlplane/http/message.hpp"
#include "services/controlplane/http/tls_context.hpp"
#include "shared/domain/result.hpp"

namespace mooring::controlplane::http {

// Called once per request on the server's executor. It may suspend (blocking queries); an
// exception becomes a 500 and is logged.
using Handler = std::function<boost::asio::awaitable<Response>(Request)>;

// Told, on the server's executor, of each request the server answered itself rather than the
// handler: one it could not read or refuses to (400 unparsable, 413 body limit, 431 header
// limit, 400/501 a Transfer-Encoding it does not take), and a handler that threw (500). The
// request holds what is known of it: the method and path when the request line could be read
// (never the query, headers or body), the remote address. For the audit log.
using Refused = std::function<void(const Request&, const Response&)>;

struct ServerConfig {
  std::string address = "127.0.0.1";
  std::uint16_t port = 4700;  // 0: the OS picks (tests)
  // Connection limits. A new connection over one first takes the place of an idle one (waiting
  // for a request, no byte of it read yet): the oldest idle connection of the same client for the
  // per-client limit, the oldest idle of anyone for the global one. Only when none is idle does it
  // get a 503 with Retry-After naming the limit, and is closed, rather than being reset. Both are
  // at least 1.
  // 1024 in all: far more than the API's users need (CLI calls, a few schedulers or UIs each
  // holding some blocking queries), and still a small share of the file descriptors a service
  // gets. 256 per client address (Nomad uses 100, Consul 200): one busy host holding a blocking
  // query per watched volume fits, while no single address can take more than a quarter of the
  // slots. Behind a proxy every client shares its address; raise the per-client limit there.
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_client = 256;
  std::size_t header_limit = 16 * 1024;  // larger headers: 431
  std::size_t body_limit = 1024 * 1024;  // larger bodies: 413
  // The request line and headers must arrive within this time: from the accept for a new
  // connection, from the first byte for a request on a kept-alive one. A client trickling its
  // headers (slowloris) holds a slot no longer than this. Capped by read_timeout.
  std::chrono::milliseconds header_timeout{5'000};
  // A body must arrive within this time once its headers did, and a keep-alive connection may sit
  // idle this long (unless its slot is needed sooner, see above).
  std::chrono::milliseconds read_timeout{30'000};
  std::chrono::milliseconds write_timeout{30'000};
  // HTTPS when a certificate is given (see reload_tls).
  TlsFiles tls;
  // Requests answered by the server itself (see Refused); none: not reported.
  Refused refused;
};

class Server {
 public:
  Server(boost::asio::any_io_executor executor, ServerConfig config, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads (again) the certificate, key and client CA named in the config; call it before
  // listen() when serving HTTPS, and on SIGHUP to pick up renewed files. New connections use the
  // new files, open ones keep the old; on an error the old stay in use. No-op for plain HTTP.
  domain::Expected<void> reload_tls();
  bool secure() const;  // HTTPS is loaded

  // Binds and listens; an error (address in use, bad address) is returned, not thrown.
  boost::system::error_code listen();
  // The bound port (useful with port 0). Valid after listen().
  std::uint16_t port() const;
  // Starts accepting. Call after listen().
  void start();

  // Graceful stop: closes the listener, closes idle keep-alive connections, lets requests being
  // handled or written finish within `grace`, ends streamed bodies (their last chunk is written),
  // then closes whatever is left. Returns when every
  // session has ended. Blocking queries must be released by the handler's owner first (the state
  // store does that), or they run into the grace deadline.
  boost::asio::awaitable<void> shutdown(std::chrono::milliseconds grace);

  // Connections being served (not counting refused ones still being closed).
  std::size_t connections() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane::http
