#include "shared/rpc/channel.hpp"

#include "shared/async/cancelled.hpp"
#include "shared/rpc/transport_security.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <grpcpp/channel.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

namespace mooring::rpc {

namespace asio = boost::asio;

std::string normalize_target(std::string_view endpoint) {
  if (!endpoint.empty() && endpoint.front() == '/') return "unix://" + std::string(endpoint);
  return std::string(endpoint);
}

bool is_unix_target(std::string_view target) { return target.rfind("unix:", 0) == 0; }

std::shared_ptr<grpc::Channel> make_channel(std::string_view endpoint, const ChannelOptions& options) {
  const auto target = normalize_target(endpoint);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(options.initial_reconnect_backoff.count()));
  // A connect() to a local socket that is not there fails in microseconds, so a plugin on a UNIX
  // socket is dialled again every 250 ms at most: one that comes back after a long outage is
  // reached at once instead of after gRPC's grown backoff (5 s), which the release waiting for
  // it would sleep out.
  auto max_backoff = options.max_reconnect_backoff;
  if (is_unix_target(target)) max_backoff = std::min(max_backoff, kUnixMaxReconnectBackoff);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(max_backoff.count()));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options.min_reconnect_backoff.count()));
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  if (options.private_subchannels) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!is_unix_target(target) && options.keepalive_time.count() > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(options.keepalive_time.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(options.keepalive_timeout.count()));
  }
  if (options.security && !is_unix_target(target))
    return grpc::CreateCustomChannel(target, options.security->channel_credentials(options.peer), args);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

std::shared_ptr<grpc::Channel> make_channel(std::string_view endpoint) {
  return make_channel(endpoint, ChannelOptions{});
}

namespace {

// One process-wide completion queue and thread deliver connectivity notifications; the C++
// API has no callback form of NotifyOnStateChange. Intentionally leaked: it lives as long as
// the process, like gRPC's own threads, and never runs Mooring code (it only posts).
class StateWatcher {
 public:
  struct Tag {
    std::function<void(bool changed)> fire;
    std::shared_ptr<grpc::Channel> channel;  // keeps the channel alive while watched
  };

  static StateWatcher& instance() {
    static StateWatcher* watcher = new StateWatcher();
    return *watcher;
  }

  void watch(std::shared_ptr<grpc::Channel> channel, grpc_connectivity_state last,
             std::chrono::system_clock::time_point deadline, std::function<void(bool)> fire) {
    auto* tag = new Tag{std::move(fire), channel};
    channel->NotifyOnStateChange(last, deadline, &queue_, tag);
  }

 private:
  StateWatcher() {
    std::thread([this] {
      void* raw = nullptr;
      bool ok = false;
      while (queue_.Next(&raw, &ok)) {
        std::unique_ptr<Tag> tag(static_cast<Tag*>(raw));
        tag->fire(ok);
      }
    }).detach();
  }
  grpc::CompletionQueue queue_;
};

// Completes with true when the state moved away from `last`, false at `deadline` or on
// cancellation (which completes at once; the watch itself ends at its deadline).
struct InitiateStateChange {
  template <class Handler>
  void operator()(Handler handler, std::shared_ptr<grpc::Channel> channel, grpc_connectivity_state last,
                  std::chrono::system_clock::time_point deadline) const {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto work = asio::make_work_guard(asio::get_associated_executor(handler));
    using Work = decltype(work);
    using Slot = decltype(slot);
    struct Pending {
      Pending(Handler h, Work w, Slot s) : handler(std::move(h)), guard(std::move(w)), cancel_slot(s) {}
      std::mutex mutex;
      std::optional<Handler> handler;
      Work guard;
      Slot cancel_slot;
      // Called once by the watch and at most once by cancellation; the first one completes.
      void complete(const std::shared_ptr<Pending>& self, bool changed) {
        std::optional<Handler> taken;
        {
          std::lock_guard lock(mutex);
          if (!handler) return;
          taken.emplace(std::move(*handler));
          handler.reset();
        }
        auto executor = guard.get_executor();
        asio::post(executor, [self, resume = std::move(*taken), changed]() mutable {
          if (self->cancel_slot.is_connected()) self->cancel_slot.clear();
          self->guard.reset();
          std::move(resume)(changed);
        });
      }
    };
    auto pending = std::make_shared<Pending>(std::move(handler), std::move(work), slot);
    if (slot.is_connected()) {
      slot.assign([pending](asio::cancellation_type) { pending->complete(pending, false); });
    }
    StateWatcher::instance().watch(std::move(channel), last, deadline,
                                   [pending](bool changed) { pending->complete(pending, changed); });
  }
};

}  // namespace

asio::awaitable<bool> wait_connected(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout) {
  using std::chrono::system_clock;
  const auto deadline = system_clock::now() + timeout;
  for (;;) {
    const auto state = channel->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) co_return true;
    if (state == GRPC_CHANNEL_SHUTDOWN) co_return false;
    const auto now = system_clock::now();
    if (now >= deadline) co_return false;
    // Short slices bound how long an abandoned watch (after cancellation) lingers.
    const auto slice = std::min<system_clock::time_point>(deadline, now + std::chrono::milliseconds(250));
    co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(bool)>(
        InitiateStateChange{}, asio::use_awaitable, channel, state, slice);
    if (async::is_cancelled(co_await asio::this_coro::cancellation_state)) co_return false;
  }
}

}  // namespace mooring::rpc
