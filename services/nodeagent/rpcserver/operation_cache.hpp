// The rpcserver room: controller calls that carry an operation id run once. The control plane
// derives the id from committed state (services/controlplane/claims/operation_id.hpp), so a new
// leader resending a call the old one sent uses the same id: a repeat whose call is in flight
// joins it, a repeat of a finished one is answered from its result without reaching the plugin.
// The plugin call runs in the cache's own task group, not in the caller's: a caller that goes
// away (its control plane was killed) does not cancel it, so its result is there for the resend.
// Only successful and definitive answers are kept (the caller decides which), for `ttl`, at most
// `max_entries`; anything else is forgotten when the call ends, so its repeat asks the plugin.
// With `file` set the cache is durable (operation_log.hpp): each call's intent is flushed before
// it reaches the plugin and its kept result before the caller hears it, so after a restart a
// resend is answered from the result; a call whose intent is there without a result (the agent
// died mid-call) is resolved by `resolve` (ask the plugin) when the caller gives one, otherwise
// sent again (CSI makes both calls idempotent). The flushes run on the cache's own thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <grpcpp/support/status.h>

#include "shared/async/task_group.hpp"

namespace mooring::nodeagent {

struct OperationAnswer {
  grpc::Status status;
  std::string response;  // the serialized response message (when status is OK)
};

struct OperationCacheOptions {
  std::chrono::milliseconds ttl{std::chrono::minutes(10)};  // longer than any failover and its resend
  std::size_t max_entries = 10'000;                         // oldest finished results go first
  std::filesystem::path file;  // the durable record (and `<file>.journal`); empty: in memory only
};

class OperationCache {
 public:
  // plugin: the plugin ran it now; joined: the same call in flight; cached: a kept result;
  // resolved: a call cut off by a restart whose outcome the plugin told (`resolve`).
  enum class Source { plugin, joined, cached, resolved };
  struct Result {
    OperationAnswer answer;
    Source source = Source::plugin;
  };
  using Call = std::function<boost::asio::awaitable<OperationAnswer>()>;
  using Keep = std::function<bool(const grpc::Status&)>;
  // Asked instead of the plugin call for an id whose intent was recorded before a restart but
  // not its result: the answer when the plugin can tell the call took effect, nullopt to send it.
  using Resolve = std::function<boost::asio::awaitable<std::optional<OperationAnswer>>()>;

  OperationCache(boost::asio::any_io_executor executor, OperationCacheOptions options = {});
  ~OperationCache();
  OperationCache(const OperationCache&) = delete;
  OperationCache& operator=(const OperationCache&) = delete;

  // Runs `call` at most once per `key` while its result is kept. `fingerprint` identifies the
  // request: a key seen with another fingerprint (a caller reusing an id for a different request,
  // a bug) is not answered from the other request's result; it runs on its own, uncached.
  // `call` owns what it needs (it may outlive the caller). Cancelling the awaiting coroutine
  // stops the waiting, not the call. After shutdown() the answer is UNAVAILABLE.
  boost::asio::awaitable<Result> run(std::string key, std::uint64_t fingerprint, Call call, Keep keep,
                                     Resolve resolve = {});

  // Cancels the calls in flight and waits for them (the agent's shutdown).
  boost::asio::awaitable<void> shutdown();

  std::size_t size() const;        // kept results and calls in flight
  std::size_t kept() const;        // kept results
  std::size_t kept_bytes() const;  // an estimate of the heap the kept results hold
  std::size_t in_doubt() const;    // calls cut off by the last restart, not resent yet
  // Completes once every record submitted so far is on disk (tests, shutdown).
  boost::asio::awaitable<void> flushed();

 private:
  struct Flight;
  struct State;  // shared with the calls in flight, which may end after the cache is gone
  static boost::asio::awaitable<void> fly(std::shared_ptr<State> state, std::string key, std::uint64_t fingerprint,
                                          std::shared_ptr<Flight> flight, Call call, Keep keep, Resolve resolve);

  boost::asio::any_io_executor executor_;
  std::shared_ptr<State> state_;
  async::TaskGroup tasks_;  // last: destroyed (and cancelled) first
};

}  // namespace mooring::nodeagent
