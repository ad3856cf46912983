// Callback-API gRPC servers whose handlers are coroutines on our executor (asio-grpc's
// server_callback_coroutine model), and a small wrapper that builds, starts and shuts down a
// grpc::Server without blocking the io_context.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <grpcpp/support/status.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace grpc {
class CallbackServerContext;
class Server;
class ServerUnaryReactor;
class Service;
}  // namespace grpc

namespace mooring::rpc {

class TransportSecurity;

using UnaryHandler = std::function<boost::asio::awaitable<grpc::Status>()>;

// Use inside a CallbackService method:
//   grpc::ServerUnaryReactor* Probe(grpc::CallbackServerContext* ctx, const ProbeRequest* req,
//                                   ProbeResponse* resp) override {
//     return rpc::serve(executor_, ctx, [=, this]() -> awaitable<grpc::Status> { ... });
//   }
// The handler runs as a coroutine on `executor`; request/response stay valid until it returns.
// Its status is sent with Finish exactly once. An exception becomes INTERNAL (and is logged with
// the method name); a client cancel or deadline cancels the coroutine (terminal cancellation).
// The io_context must keep running until the server has shut down, or Finish never happens.
// `method` names the call in logs (gRPC's server context does not expose it).
grpc::ServerUnaryReactor* serve(boost::asio::any_io_executor executor, grpc::CallbackServerContext* context,
                                std::string method, UnaryHandler handler);
grpc::ServerUnaryReactor* serve(boost::asio::any_io_executor executor, grpc::CallbackServerContext* context,
                                UnaryHandler handler);

struct ServerOptions {
  // "unix:/path" or "unix:///path" (a stale socket file is replaced), or "host:port"
  // (port 0: the OS picks; see Server::port()).
  std::string address;
  std::vector<grpc::Service*> services;  // not owned; must outlive the Server
  int max_receive_message_bytes = 16 * 1024 * 1024;
  // Serve the standard grpc.health.v1.Health service (what Kubernetes' `grpc:` probes and
  // grpc_health_probe call): service "" is SERVING while the server runs; other names are set
  // with Server::set_serving.
  bool health_service = false;
  // Mutual TLS on a TCP address (client certificates required, signed by the CA); null: plaintext.
  // UNIX sockets are always plaintext (CSI's model: local, file-permission protected).
  std::shared_ptr<const TransportSecurity> security;
};

class Server {
 public:
  // Builds and starts the server; nullptr with `error` filled when it could not bind.
  static std::unique_ptr<Server> start(const ServerOptions& options, std::string& error);

  // Shuts down at once if shutdown() was not awaited. Do not destroy a server with calls in
  // flight on a thread that runs the io_context: in-flight handlers need it to finish.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& address() const { return address_; }
  int port() const { return port_; }  // the bound TCP port; 0 for UNIX sockets

  // The grpc.health.v1 status of `service` (needs ServerOptions::health_service).
  void set_serving(const std::string& service, bool serving);

  // Stops accepting calls, lets in-flight calls finish for up to `grace`, then cancels them.
  // grpc::Server::Shutdown blocks until every handler has finished, and our handlers need the
  // io_context, so it runs on a helper thread while this coroutine waits.
  boost::asio::awaitable<void> shutdown(std::chrono::milliseconds grace);
  // The same, blocking: only from a thread that is not running the io_context.
  void shutdown_blocking(std::chrono::milliseconds grace);

 private:
  Server() = default;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
  bool shut_down_ = false;
  std::thread shutdown_thread_;
};

}  // namespace mooring::rpc
