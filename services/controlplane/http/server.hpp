// HTTP room: the Beast session loop. It owns sockets, limits and timeouts and nothing else; every
// request is handed to a Handler as plain values (message.hpp), so the API layer has no I/O.
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

namespace mooring::controlplane::http {

struct ServerConfig {
  std::string address = "127.0.0.1";
  std::uint16_t port = 4700;  // 0: the OS picks (tests)
  std::size_t max_connections = 512;     // more get 503 and are closed
  std::size_t header_limit = 16 * 1024;  // larger headers: 431
  std::size_t body_limit = 1024 * 1024;  // larger bodies: 413
  // A request (headers and body) must arrive within this time once the client starts it, and a
  // keep-alive connection may sit idle this long.
  std::chrono::milliseconds read_timeout{30'000};
  std::chrono::milliseconds write_timeout{30'000};
};

// Called once per request on the server's executor. It may suspend (blocking queries); an
// exception becomes a 500 and is logged.
using Handler = std::function<boost::asio::awaitable<Response>(Request)>;

class Server {
 public:
  Server(boost::asio::any_io_executor executor, ServerConfig config, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens; an error (address in use, bad address) is returned, not thrown.
  boost::system::error_code listen();
  // The bound port (useful with port 0). Valid after listen().
  std::uint16_t port() const;
  // Starts accepting. Call after listen().
  void start();

  // Graceful stop: closes the listener, closes idle keep-alive connections, lets requests being
  // handled or written finish within `grace`, then closes whatever is left. Returns when every
  // session has ended. Blocking queries must be released by the handler's owner first (the state
  // store does that), or they run into the grace deadline.
  boost::asio::awaitable<void> shutdown(std::chrono::milliseconds grace);

  std::size_t connections() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace mooring::controlplane::http
