#include "shared/rpc/server.hpp"

#include "shared/log/log.hpp"
#include "shared/rpc/transport_security.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

namespace mooring::rpc {

namespace asio = boost::asio;

namespace {

const log::Logger kLog{"rpc-server"};
constexpr int kTlsMaxFrameBytes = 4096;  // see Server::start

// Shared by the reactor (gRPC threads) and the coroutine (our executor). Only touched on the
// executor, except `executor` itself, which is immutable.
struct CallState {
  explicit CallState(asio::any_io_executor ex) : executor(std::move(ex)) {}
  asio::any_io_executor executor;
  asio::cancellation_signal cancel;
  bool finished = false;
};

class CoroutineReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit CoroutineReactor(std::shared_ptr<CallState> state) : state_(std::move(state)) {}

  // gRPC thread. Never touches the reactor from the executor side: the coroutine may already
  // have called Finish, after which gRPC may delete us at any time.
  void OnCancel() override {
    asio::post(state_->executor, [state = state_] {
      if (!state->finished) state->cancel.emit(asio::cancellation_type::terminal);
    });
  }

  void OnDone() override { delete this; }

 private:
  std::shared_ptr<CallState> state_;
};

grpc::Status status_from_exception(std::exception_ptr error, std::string_view method) {
  try {
    std::rethrow_exception(error);
  } catch (const boost::system::system_error& e) {
    if (e.code() == asio::error::operation_aborted) {
      kLog.debug("handler cancelled", {{"method", method}});
      return grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled");
    }
    kLog.error("handler failed", {{"method", method}, {"error", e.what()}});
  } catch (const std::exception& e) {
    kLog.error("handler failed", {{"method", method}, {"error", e.what()}});
  } catch (...) {
    kLog.error("handler failed", {{"method", method}, {"error", "unknown exception"}});
  }
  return grpc::Status(grpc::StatusCode::INTERNAL, "internal error");
}

}  // namespace

grpc::ServerUnaryReactor* serve(asio::any_io_executor executor, grpc::CallbackServerContext* context,
                                UnaryHandler handler) {
  return serve(std::move(executor), context, "unary call", std::move(handler));
}

grpc::ServerUnaryReactor* serve(asio::any_io_executor executor, grpc::CallbackServerContext* context,
                                std::string method, UnaryHandler handler) {
  (void)context;  // the handler captures what it needs; the reactor is what gRPC wants back
  auto state = std::make_shared<CallState>(executor);
  auto* reactor = new CoroutineReactor(state);
  // Spawn from the executor so the cancellation signal is only ever used on its thread.
  asio::post(executor, [state, reactor, handler = std::move(handler), method = std::move(method)]() mutable {
    // co_spawn keeps the function object alive for the coroutine's lifetime: a capturing
    // lambda coroutine reads its captures from it.
    asio::co_spawn(state->executor, std::move(handler),
                   asio::bind_cancellation_slot(
                       state->cancel.slot(), [state, reactor, method](std::exception_ptr error, grpc::Status status) {
                         state->finished = true;
                         if (error) status = status_from_exception(error, method);
                         reactor->Finish(std::move(status));
                       }));
  });
  return reactor;
}

std::unique_ptr<Server> Server::start(const ServerOptions& options, std::string& error) {
  std::unique_ptr<Server> server(new Server());
  // Process-wide in gRPC; it takes effect for servers built after it, so set it per server.
  grpc::EnableDefaultHealthCheckService(options.health_service);
  grpc::ServerBuilder builder;
  int selected_port = 0;
  const bool is_unix = options.address.rfind("unix:", 0) == 0;
  const bool tls = options.security && !is_unix;
  builder.AddListeningPort(options.address,
                           tls ? options.security->server_credentials() : grpc::InsecureServerCredentials(),
                           &selected_port);
  for (auto* service : options.services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // Let clients keep idle connections alive with pings (see channel.cpp) without a GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC turns SO_REUSEPORT on by default: a second process on the same address would then bind
  // beside the first and take half of its calls. One listener per address.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // TLS records of at most 4 KB: gRPC keeps a buffer of the largest record per connection (16 KB
  // by default). The control plane holds one connection per node: with 10,000 agents its RSS
  // fell from 1448 to 1344 MiB (bench "nodes", docs/engineering-notes.md "Node scale"). Larger
  // messages go as more records.
  if (tls) builder.AddChannelArgument(GRPC_ARG_TSI_MAX_FRAME_SIZE, kTlsMaxFrameBytes);
  server->server_ = builder.BuildAndStart();
  if (!server->server_) {
    error = "cannot listen on " + options.address + " (address in use, or not an address of this host)";
    return nullptr;
  }
  if (!is_unix && selected_port == 0) {
    error = "cannot bind " + options.address + " (address in use, or not an address of this host)";
    server->server_->Shutdown();
    return nullptr;
  }
  server->address_ = options.address;
  server->port_ = is_unix ? 0 : selected_port;
  kLog.info("grpc server listening",
            {{"address", options.address}, {"port", server->port_}, {"tls", tls ? "mutual" : "off"}});
  return server;
}

void Server::set_serving(const std::string& service, bool serving) {
  if (auto* health = server_ ? server_->GetHealthCheckService() : nullptr) health->SetServingStatus(service, serving);
}

Server::~Server() {
  if (!shut_down_ && server_) server_->Shutdown(std::chrono::system_clock::now());
  if (shutdown_thread_.joinable()) shutdown_thread_.join();
}

void Server::shutdown_blocking(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
}

asio::awaitable<void> Server::shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) co_return;
  shut_down_ = true;
  auto initiate = [this, grace](auto handler) {
    auto work = asio::make_work_guard(asio::get_associated_executor(handler));
    shutdown_thread_ = std::thread([this, grace, handler = std::move(handler), work = std::move(work)]() mutable {
      server_->Shutdown(std::chrono::system_clock::now() + grace);
      server_->Wait();
      auto executor = work.get_executor();
      asio::post(executor, [handler = std::move(handler), work = std::move(work)]() mutable {
        work.reset();
        std::move(handler)();
      });
    });
  };
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(initiate, asio::use_awaitable);
  shutdown_thread_.join();
  kLog.info("grpc server stopped", {{"address", address_}});
}

}  // namespace mooring::rpc
