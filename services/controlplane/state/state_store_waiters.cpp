// The state store's waiters (state_store.hpp): coroutines that wait for commits to be durable
// (an answer leaving the process), for a read to be answerable, or for a table to change
// (blocking queries, the claim GC). Each sleeps on a timer of its own that a flush, a switch to
// reads from memory, a commit or shutdown cancels to wake it.
#include "services/controlplane/state/state_store.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace mooring::controlplane {

namespace asio = boost::asio;

struct StateStore::Waiter {
  asio::steady_timer timer;
};

struct StateStore::DurableWaiter {
  asio::steady_timer timer;
  std::uint64_t index = 0;
  std::optional<domain::Status> result;  // set by the flush that settles it
  bool read = false;                     // readable_since(): released when the store turns read-only
};

namespace {

// Sleeps on `waiter.timer` with the waiter in `list`, so that a notifier can cancel the timer to
// wake it; unregistered again however the wait ends (also when the frame is destroyed while
// suspended). Cancelling the awaiting coroutine throws operation_aborted.
template <class W>
asio::awaitable<void> sleep_registered(std::list<W*>& list, W& waiter) {
  struct Registration {
    std::list<W*>& list;
    typename std::list<W*>::iterator pos;
    ~Registration() { list.erase(pos); }
  } registration{list, list.insert(list.end(), &waiter)};
  auto [ec] = co_await waiter.timer.async_wait(asio::as_tuple(asio::use_awaitable));
  (void)ec;  // fired at the deadline or cancelled by a notifier: the caller looks at the state
  auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none)
    throw boost::system::system_error(asio::error::operation_aborted);
}

}  // namespace

void StateStore::wake_durable(const domain::Status& failure) {
  for (auto* w : durable_waiters_) {
    if (w->result) continue;
    if (!failure)
      w->result = failure;
    else if (w->index <= durable_index_)
      w->result = domain::Status{};
    else
      continue;
    w->timer.cancel();
  }
}

asio::awaitable<domain::Status> StateStore::durable_since(std::uint64_t failed_flushes) const {
  auto st = co_await durable(index_);
  if (st && lost_.size() != failed_flushes) st = domain::error(lost_.back().error);
  co_return st;
}

asio::awaitable<domain::Status> StateStore::readable_since(std::uint64_t failed_flushes) const {
  if (read_only_ || reads_from_memory_) co_return domain::Status{};
  auto st = co_await wait_durable(index_, /*read=*/true);
  // Released by set_read_only() or set_reads_from_memory(), or turned so meanwhile.
  if (read_only_ || reads_from_memory_) co_return domain::Status{};
  if (st && lost_.size() != failed_flushes) st = domain::error(lost_.back().error);
  co_return st;
}

asio::awaitable<domain::Status> StateStore::durable(std::uint64_t index) const {
  co_return co_await wait_durable(index, /*read=*/false);
}

asio::awaitable<domain::Status> StateStore::wait_durable(std::uint64_t index, bool read) const {
  for (const auto& lost : lost_)
    if (index >= lost.first && index <= lost.last) co_return domain::error(lost.error);
  if (index <= durable_index_) co_return domain::Status{};
  if (broken_) co_return domain::error("the state is not durable: " + *broken_);
  DurableWaiter waiter{asio::steady_timer(executor_, std::chrono::steady_clock::time_point::max()), index, {}, read};
  while (!waiter.result) co_await sleep_registered(durable_waiters_, waiter);
  co_return *waiter.result;
}

void StateStore::set_reads_from_memory(bool on) {
  reads_from_memory_ = on;
  if (on) release_reads();
}

void StateStore::set_read_only(std::optional<std::string> why) {
  read_only_ = std::move(why);
  if (read_only_) release_reads();
}

void StateStore::release_reads() {
  for (auto* w : durable_waiters_) {
    if (!w->read || w->result) continue;
    w->result = domain::Status{};
    w->timer.cancel();
  }
}

void StateStore::notify(Table t) {
  auto it = waiters_.find(t);
  if (it == waiters_.end()) return;
  for (auto* w : it->second) w->timer.cancel();
}

void StateStore::release_waiters() {
  released_ = true;
  for (auto& [t, list] : waiters_)
    for (auto* w : list) w->timer.cancel();
}

std::size_t StateStore::waiter_count() const {
  std::size_t n = 0;
  for (const auto& [t, list] : waiters_) n += list.size();
  return n;
}

asio::awaitable<std::uint64_t> StateStore::wait_for_change(Table t, std::uint64_t after,
                                                           std::chrono::steady_clock::duration timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (table_index(t) > after || released_ || std::chrono::steady_clock::now() >= deadline) co_return table_index(t);
    // One timer per waiter: it fires at the deadline, and a commit to the table (or shutdown)
    // cancels it early. The timer is registered only while this coroutine is suspended on it.
    Waiter waiter{asio::steady_timer(executor_, deadline)};
    co_await sleep_registered(waiters_[t], waiter);
  }
}

}  // namespace mooring::controlplane
