#include "shared/rpc/client_call.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <grpcpp/client_context.h>

#include <memory>
#include <optional>

namespace mooring::rpc {

namespace asio = boost::asio;

namespace {

// The callback-wrapper pattern (Asio's cpp20 operations/callback_wrapper.cpp): the handler and
// a work guard travel into gRPC's callback; the callback posts the completion back.
struct InitiateUnary {
  template <class Handler>
  void operator()(Handler handler, grpc::ClientContext* context, const StartUnary* start) const {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto work = asio::make_work_guard(asio::get_associated_executor(handler));

    struct Pending {
      Handler handler;
      decltype(work) guard;
      decltype(slot) cancel_slot;
    };
    // gRPC wants a copyable std::function; the handler is move-only.
    auto pending = std::make_shared<Pending>(Pending{std::move(handler), std::move(work), slot});

    if (slot.is_connected()) {
      // Runs on our executor; the context stays alive until the handler below has run.
      slot.assign([context](asio::cancellation_type) { context->TryCancel(); });
    }

    (*start)(context, [pending](grpc::Status status) {
      // On a gRPC thread (or inline): only hop back.
      auto executor = pending->guard.get_executor();
      asio::post(executor, [pending, status = std::move(status)]() mutable {
        // Detach the cancellation handler before the coroutine resumes and destroys the context.
        if (pending->cancel_slot.is_connected()) pending->cancel_slot.clear();
        auto handler = std::move(pending->handler);
        pending->guard.reset();
        std::move(handler)(std::move(status));
      });
    });
  }
};

}  // namespace

asio::awaitable<grpc::Status> unary(CallOptions options, StartUnary start) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options.timeout);
  context.set_wait_for_ready(options.wait_for_ready);
  for (const auto& [key, value] : options.metadata) context.AddMetadata(key, value);
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(grpc::Status)>(
      InitiateUnary{}, asio::use_awaitable, &context, &start);
}

}  // namespace mooring::rpc
