#include "services/nodeagent/rpcserver/operation_cache.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include <boost/system/system_error.hpp>

#include "services/nodeagent/rpcserver/operation_log.hpp"
#include "shared/async/serial_worker.hpp"
#include "shared/async/wake_signal.hpp"
#include "shared/log/log.hpp"

namespace mooring::nodeagent {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

const log::Logger kLog{"operation-cache"};

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct OperationCache::Flight {
  explicit Flight(asio::any_io_executor ex) : finished(std::move(ex)) {}
  bool done = false;
  bool in_doubt = false;      // restored intent without a result: the next run resolves or resends it
  bool keep_pending = false;  // its result is being flushed: a compaction meanwhile must write it
  bool resolved = false;      // answered by `resolve` (the plugin told), not by the call
  std::int64_t at_ms = 0;     // wall clock of its intent, then of its result (the record's age)
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
    std::weak_ptr<const Flight> flight;  // the result it expires, if the key still holds that one
  };

  explicit State(OperationCacheOptions o) : options(std::move(o)) {}

  // Drops the key's entry if it still holds `flight` (a later call may have replaced it).
  void forget(const std::string& key, const Flight* flight) {
    auto it = entries.find(key);
    if (it == entries.end() || it->second.flight.get() != flight) return;
    if (flight->done && flight->bytes > 0) {
      kept_bytes -= flight->bytes;
      --kept;
    }
    if (flight->in_doubt) --doubtful;
    entries.erase(it);
  }

  void evict(Clock::time_point now) {
    while (!expiries.empty() && (expiries.front().at <= now || kept > options.max_entries)) {
      if (auto flight = expiries.front().flight.lock()) forget(expiries.front().key, flight.get());
      expiries.pop_front();
    }
  }

  void keep(const std::string& key, const std::shared_ptr<Flight>& kept_flight, Clock::time_point expires) {
    Flight& flight = *kept_flight;
    // What a kept result holds: the key twice (map, expiry queue), the answer, the nodes.
    flight.bytes = 2 * key.size() + flight.answer.response.size() + flight.answer.status.error_message().size() +
                   sizeof(Flight) + sizeof(Entry) + sizeof(Expiry) + 64;
    kept_bytes += flight.bytes;
    ++kept;
    expiries.push_back({expires, key, kept_flight});
  }

  // What the record must hold now: kept results (and those being flushed) and calls not ended.
  std::vector<OperationRecord> live() const {
    std::vector<OperationRecord> out;
    out.reserve(entries.size());
    for (const auto& [key, e] : entries) {
      const Flight& f = *e.flight;
      OperationRecord r{.key = key, .fingerprint = e.fingerprint, .at_ms = f.at_ms};
      if ((f.done && f.bytes > 0) || f.keep_pending) {
        r.kind = OperationRecord::Kind::result;
        r.code = static_cast<int>(f.answer.status.error_code());
        r.message = f.answer.status.error_message();
        r.response = f.answer.response;
      } else if (f.done) {
        continue;
      }
      out.push_back(std::move(r));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.at_ms < b.at_ms; });
    return out;
  }

  // Appends `record` on the worker thread and waits until it is flushed. A failure is logged and
  // the call goes on: the cache still works in memory, only this record's restart guarantee is lost.
  static asio::awaitable<void> persist(std::shared_ptr<State> state, OperationRecord record) {
    if (!state->log) co_return;
    std::error_code ec;
    OperationLog* log = state->log.get();
    co_await state->worker->run([&] { ec = log->append(record); });
    if (ec)
      kLog.error("cannot record a controller call; a resend after an agent restart may reach the plugin again",
                 {{"file", log->journal_file().string()}, {"operation_id", record.key}, {"error", ec.message()}});
    // Compacted on the worker, after every record submitted so far: records submitted later go to
    // the restarted journal, and everything before is in `live()` taken now.
    // Counted here, on the executor: the log's own count belongs to the worker thread.
    if (++state->journal_records > 2 * state->entries.size() + 1024) {
      state->journal_records = 0;
      state->worker->submit([log, live = state->live()] {
        if (auto ec = log->compact(live))
          kLog.error("cannot compact the operation record", {{"file", log->file().string()}, {"error", ec.message()}});
      });
    }
  }

  OperationCacheOptions options;
  std::unordered_map<std::string, Entry> entries;
  std::deque<Expiry> expiries;  // kept results in the order they finished (= expiry order)
  std::size_t kept = 0, kept_bytes = 0, doubtful = 0;
  std::size_t journal_records = 0;              // appended since the last compaction was submitted
  std::unique_ptr<OperationLog> log;            // null: in memory only
  std::unique_ptr<async::SerialWorker> worker;  // after `log`: destroyed first, finishing its jobs on it
};

OperationCache::OperationCache(asio::any_io_executor executor, OperationCacheOptions options)
    : executor_(executor), state_(std::make_shared<State>(std::move(options))), tasks_(executor, "operation-cache") {
  auto& st = *state_;
  if (st.options.file.empty()) return;
  st.log = std::make_unique<OperationLog>(st.options.file);
  st.worker = std::make_unique<async::SerialWorker>("operation-cache");
  // The agent's start, before any call: read here, on the caller's thread.
  std::vector<std::string> warnings;
  const auto records = st.log->load(warnings);
  for (const auto& w : warnings) kLog.warn(w, {{"file", st.options.file.string()}});
  std::map<std::string, const OperationRecord*> last;  // a key's last record decides
  for (const auto& r : records) last[r.key] = &r;
  std::vector<const OperationRecord*> restored;
  const auto now_wall = wall_ms();
  const auto ttl_ms = std::chrono::duration_cast<std::chrono::milliseconds>(st.options.ttl).count();
  for (const auto& [key, r] : last)
    if (now_wall - r->at_ms < ttl_ms) restored.push_back(r);
  std::sort(restored.begin(), restored.end(), [](const auto* a, const auto* b) { return a->at_ms < b->at_ms; });
  const auto now = Clock::now();
  for (const auto* r : restored) {
    auto flight = std::make_shared<Flight>(executor_);
    flight->at_ms = r->at_ms;
    // A wall clock set back would make an age negative: count it as new, bounded by the ttl.
    const auto age = std::chrono::milliseconds(std::clamp<std::int64_t>(now_wall - r->at_ms, 0, ttl_ms));
    if (r->kind == OperationRecord::Kind::result) {
      flight->done = true;
      flight->answer = {grpc::Status(static_cast<grpc::StatusCode>(r->code), r->message), r->response};
      st.keep(r->key, flight, now + st.options.ttl - age);
    } else {
      flight->in_doubt = true;
      ++st.doubtful;
      st.expiries.push_back({now + st.options.ttl - age, r->key, flight});
    }
    st.entries.emplace(r->key, State::Entry{r->fingerprint, std::move(flight)});
  }
  st.evict(now);
  if (!restored.empty())
    kLog.info("controller calls restored from before the restart",
              {{"file", st.options.file.string()},
               {"results", static_cast<std::int64_t>(st.kept)},
               {"in_doubt", static_cast<std::int64_t>(st.doubtful)}});
  // Start from a checkpoint of what is live: expired records and the old journal go.
  if (auto ec = st.log->compact(st.live()))
    kLog.error("cannot rewrite the operation record", {{"file", st.options.file.string()}, {"error", ec.message()}});
}

OperationCache::~OperationCache() = default;

std::size_t OperationCache::size() const { return state_->entries.size(); }
std::size_t OperationCache::kept() const { return state_->kept; }
std::size_t OperationCache::kept_bytes() const { return state_->kept_bytes; }
std::size_t OperationCache::in_doubt() const { return state_->doubtful; }

asio::awaitable<void> OperationCache::flushed() {
  if (state_->worker) co_await state_->worker->drained();
}

asio::awaitable<OperationCache::Result> OperationCache::run(std::string key, std::uint64_t fingerprint, Call call,
                                                            Keep keep, Resolve resolve) {
  auto& st = *state_;
  st.evict(Clock::now());
  std::shared_ptr<Flight> flight;
  Source source = Source::plugin;
  auto it = st.entries.find(key);
  if (it != st.entries.end() && it->second.fingerprint != fingerprint) {
    kLog.warn("operation id reused for a different request; calling the plugin without deduplication",
              {{"operation_id", key}});
    // A named local: GCC 12 miscompiles a co_await inside a braced initializer.
    OperationAnswer answer = co_await call();
    co_return Result{.answer = std::move(answer), .source = Source::plugin};
  }
  if (it != st.entries.end() && !it->second.flight->in_doubt) {
    flight = it->second.flight;
    source = flight->done ? Source::cached : Source::joined;
    kLog.debug(
        flight->done ? "repeated operation answered from its result" : "repeated operation joins the call in flight",
        {{"operation_id", key}});
  } else {
    if (it != st.entries.end()) {  // cut off by a restart: ask the plugin if it can tell, else send again
      st.forget(key, it->second.flight.get());
      kLog.warn(resolve ? "a controller call was cut off by an agent restart; asking the plugin for its outcome"
                        : "a controller call was cut off by an agent restart; sending it again (idempotent by CSI)",
                {{"operation_id", key}});
    } else {
      resolve = nullptr;
    }
    flight = std::make_shared<Flight>(executor_);
    flight->at_ms = wall_ms();
    st.entries.emplace(key, State::Entry{fingerprint, flight});
    bool started = tasks_.spawn("operation", [state = state_, key, fingerprint, flight, call = std::move(call),
                                              keep = std::move(keep), resolve = std::move(resolve)] {
      return fly(state, key, fingerprint, flight, call, keep, resolve);
    });
    if (!started) {
      st.forget(key, flight.get());
      co_return Result{.answer = {grpc::Status(grpc::StatusCode::UNAVAILABLE, "node agent shutting down"), {}},
                       .source = Source::plugin};
    }
  }
  while (!flight->done) co_await flight->finished.wait(flight->finished.generation());
  if (source == Source::plugin && flight->resolved) source = Source::resolved;
  co_return Result{.answer = flight->answer, .source = source};
}

asio::awaitable<void> OperationCache::fly(std::shared_ptr<State> state, std::string key, std::uint64_t fingerprint,
                                          std::shared_ptr<Flight> flight, Call call, Keep keep, Resolve resolve) {
  // The intent is on disk before the plugin can hear the call.
  // Named locals: GCC 12 miscompiles a braced temporary passed to a coroutine inside co_await.
  OperationRecord intent{
      .kind = OperationRecord::Kind::intent, .key = key, .fingerprint = fingerprint, .at_ms = flight->at_ms};
  co_await State::persist(state, std::move(intent));
  OperationAnswer answer;
  bool cancelled = false, resolved = false;
  try {
    if (resolve) {
      if (auto told = co_await resolve()) {
        answer = std::move(*told);
        resolved = true;
      }
    }
    if (!resolved) answer = co_await call();
  } catch (const boost::system::system_error& e) {
    // Waiters must hear an answer whatever happened; none of these is kept.
    cancelled = true;
    if (e.code() == asio::error::operation_aborted)
      answer.status = grpc::Status(grpc::StatusCode::CANCELLED, "node agent shutting down");
    else
      answer.status = grpc::Status(grpc::StatusCode::INTERNAL, "internal error");
  } catch (const std::exception& e) {
    kLog.error("controller call failed", {{"operation_id", key}, {"error", e.what()}});
    cancelled = true;
    answer.status = grpc::Status(grpc::StatusCode::INTERNAL, "internal error");
  }
  flight->answer = std::move(answer);
  if (!cancelled && keep(flight->answer.status)) {
    // The result is on disk before any caller hears it.
    flight->at_ms = wall_ms();
    flight->keep_pending = true;
    OperationRecord result{.kind = OperationRecord::Kind::result,
                           .key = key,
                           .fingerprint = fingerprint,
                           .at_ms = flight->at_ms,
                           .code = static_cast<int>(flight->answer.status.error_code()),
                           .message = flight->answer.status.error_message(),
                           .response = flight->answer.response};
    co_await State::persist(state, std::move(result));
    flight->keep_pending = false;
    flight->done = true;
    const auto now = Clock::now();
    state->keep(key, flight, now + state->options.ttl);
    state->evict(now);
  } else {
    flight->done = true;
    state->forget(key, flight.get());  // its repeat asks the plugin again
  }
  flight->resolved = resolved;
  flight->finished.notify();
}

asio::awaitable<void> OperationCache::shutdown() {
  tasks_.cancel();
  co_await tasks_.join();
  co_await flushed();
}

}  // namespace mooring::nodeagent
