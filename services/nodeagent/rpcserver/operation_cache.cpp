#include "services/nodeagent/rpcserver/operation_cache.hpp"

#include <deque>
#include <unordered_map>

#include <boost/system/system_error.hpp>

#include "shared/async/wake_signal.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

const log::Logger& logger() {
  static const log::Logger l{"operation-cache"};
  return l;
}

}  // namespace

struct OperationCache::Flight {
  explicit Flight(asio::any_io_executor ex) : finished(std::move(ex)) {}
  bool done = false;
  OperationAnswer answer;
  std::size_t bytes = 0;  // counted in kept_bytes while kept
  async::WakeSignal finished;
};

struct OperationCache::State {
  struct Entry {
    std::uint64_t fingerprint = 0;
    std::shared_ptr<Flight> flight;
  };
  struct Expiry {
    Clock::time_point at;
    std::string key;
    const Flight* flight;  // the result it expires, if the key still holds that one
  };

  explicit State(OperationCacheOptions o) : options(o) {}

  // Drops the key's entry if it still holds `flight` (a later call may have replaced it).
  void forget(const std::string& key, const Flight* flight) {
    auto it = entries.find(key);
    if (it == entries.end() || it->second.flight.get() != flight) return;
    if (flight->done && flight->bytes > 0) {
      kept_bytes -= flight->bytes;
      --kept;
    }
    entries.erase(it);
  }

  void evict(Clock::time_point now) {
    while (!expiries.empty() && (expiries.front().at <= now || kept > options.max_entries)) {
      forget(expiries.front().key, expiries.front().flight);
      expiries.pop_front();
    }
  }

  OperationCacheOptions options;
  std::unordered_map<std::string, Entry> entries;
  std::deque<Expiry> expiries;  // kept results in the order they finished (= expiry order)
  std::size_t kept = 0, kept_bytes = 0;
};

OperationCache::OperationCache(asio::any_io_executor executor, OperationCacheOptions options)
    : executor_(executor), state_(std::make_shared<State>(options)), tasks_(executor, "operation-cache") {}

OperationCache::~OperationCache() = default;

std::size_t OperationCache::size() const { return state_->entries.size(); }
std::size_t OperationCache::kept() const { return state_->kept; }
std::size_t OperationCache::kept_bytes() const { return state_->kept_bytes; }

asio::awaitable<OperationCache::Result> OperationCache::run(std::string key, std::uint64_t fingerprint, Call call,
                                                           Keep keep) {
  auto& st = *state_;
  st.evict(Clock::now());
  std::shared_ptr<Flight> flight;
  Source source = Source::plugin;
  if (auto it = st.entries.find(key); it != st.entries.end()) {
    if (it->second.fingerprint != fingerprint) {
      logger().warn("operation id reused for a different request; calling the plugin without deduplication",
                    {{"operation_id", key}});
      // A named local: GCC 12 miscompiles a co_await inside a braced initializer.
      OperationAnswer answer = co_await call();
      co_return Result{.answer = std::move(answer), .source = Source::plugin};
    }
    flight = it->second.flight;
    source = flight->done ? Source::cached : Source::joined;
    logger().debug(flight->done ? "repeated operation answered from its result" : "repeated operation joins the call in flight",
                   {{"operation_id", key}});
  } else {
    flight = std::make_shared<Flight>(executor_);
    st.entries.emplace(key, State::Entry{fingerprint, flight});
    bool started = tasks_.spawn("operation", [state = state_, key, flight, call = std::move(call), keep = std::move(keep)] {
      return fly(state, key, flight, call, keep);
    });
    if (!started) {
      st.forget(key, flight.get());
      co_return Result{.answer = {grpc::Status(grpc::StatusCode::UNAVAILABLE, "node agent shutting down"), {}},
                       .source = Source::plugin};
    }
  }
  while (!flight->done) co_await flight->finished.wait(flight->finished.generation());
  co_return Result{.answer = flight->answer, .source = source};
}

asio::awaitable<void> OperationCache::fly(std::shared_ptr<State> state, std::string key,
                                          std::shared_ptr<Flight> flight, Call call, Keep keep) {
  OperationAnswer answer;
  bool cancelled = false;
  try {
    answer = co_await call();
  } catch (const boost::system::system_error& e) {
    // Waiters must hear an answer whatever happened; none of these is kept.
    cancelled = true;
    if (e.code() == asio::error::operation_aborted)
      answer.status = grpc::Status(grpc::StatusCode::CANCELLED, "node agent shutting down");
    else
      answer.status = grpc::Status(grpc::StatusCode::INTERNAL, "internal error");
  } catch (const std::exception& e) {
    logger().error("controller call failed", {{"operation_id", key}, {"error", e.what()}});
    cancelled = true;
    answer.status = grpc::Status(grpc::StatusCode::INTERNAL, "internal error");
  }
  flight->answer = std::move(answer);
  flight->done = true;
  if (!cancelled && keep(flight->answer.status)) {
    // What a kept result holds: the key twice (map, expiry queue), the answer, the nodes.
    flight->bytes = 2 * key.size() + flight->answer.response.size() + flight->answer.status.error_message().size() +
                    sizeof(Flight) + sizeof(State::Entry) + sizeof(State::Expiry) + 64;
    state->kept_bytes += flight->bytes;
    ++state->kept;
    const auto now = Clock::now();
    state->expiries.push_back({now + state->options.ttl, key, flight.get()});
    state->evict(now);
  } else {
    state->forget(key, flight.get());  // its repeat asks the plugin again
  }
  flight->finished.notify();
}

asio::awaitable<void> OperationCache::shutdown() {
  tasks_.cancel();
  co_await tasks_.join();
}

}  // namespace mooring::nodeagent
