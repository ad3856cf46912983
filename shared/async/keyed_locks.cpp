#include "shared/async/keyed_locks.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <deque>
#include <map>

namespace mooring::async {

namespace asio = boost::asio;

namespace {
// A timer used as a one-shot condition: the holder that unlocks sets `granted` and cancels it.
struct Waiter {
  explicit Waiter(asio::any_io_executor ex) : timer(std::move(ex), asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
  bool granted = false;
};
}  // namespace

struct KeyedLocks::State {
  struct Entry {
    bool held = false;
    std::deque<std::shared_ptr<Waiter>> waiters;
  };
  explicit State(asio::any_io_executor ex) : executor(std::move(ex)) {}

  void release(const std::string& key) {
    auto it = entries.find(key);
    if (it == entries.end()) return;
    auto& entry = it->second;
    if (!entry.waiters.empty()) {
      auto next = entry.waiters.front();
      entry.waiters.pop_front();
      next->granted = true;  // ownership passes directly: nobody can barge in between
      next->timer.cancel();
      return;
    }
    entries.erase(it);
  }

  asio::any_io_executor executor;
  std::map<std::string, Entry> entries;
};

KeyedLocks::Guard::Guard(std::shared_ptr<State> state, std::string key)
    : state_(std::move(state)), key_(std::move(key)) {}

KeyedLocks::Guard::~Guard() { unlock(); }

KeyedLocks::Guard::Guard(Guard&& other) noexcept : state_(std::move(other.state_)), key_(std::move(other.key_)) {
  other.state_.reset();
}

KeyedLocks::Guard& KeyedLocks::Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    unlock();
    state_ = std::move(other.state_);
    key_ = std::move(other.key_);
    other.state_.reset();
  }
  return *this;
}

void KeyedLocks::Guard::unlock() {
  if (!state_) return;
  auto state = std::move(state_);
  state_.reset();
  state->release(key_);
}

KeyedLocks::KeyedLocks(asio::any_io_executor executor) : state_(std::make_shared<State>(std::move(executor))) {}
KeyedLocks::~KeyedLocks() = default;

asio::awaitable<KeyedLocks::Guard> KeyedLocks::lock(std::string key) {
  auto state = state_;
  auto& entry = state->entries[key];
  if (!entry.held) {
    entry.held = true;
    co_return Guard(state, std::move(key));
  }
  auto waiter = std::make_shared<Waiter>(state->executor);
  entry.waiters.push_back(waiter);
  std::exception_ptr failure;
  try {
    co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  } catch (...) {
    failure = std::current_exception();  // cancelled before the wait started
  }
  if (waiter->granted) {
    Guard guard(state, std::move(key));
    if (failure) std::rethrow_exception(failure);  // the guard passes the lock on
    co_return guard;
  }
  auto it = state->entries.find(key);
  if (it != state->entries.end()) {
    auto& waiters = it->second.waiters;
    waiters.erase(std::remove(waiters.begin(), waiters.end(), waiter), waiters.end());
  }
  if (failure) std::rethrow_exception(failure);
  throw boost::system::system_error(asio::error::operation_aborted, "waiting for a keyed lock");
}

bool KeyedLocks::locked(const std::string& key) const {
  auto it = state_->entries.find(key);
  return it != state_->entries.end() && it->second.held;
}

std::size_t KeyedLocks::waiting(const std::string& key) const {
  auto it = state_->entries.find(key);
  return it == state_->entries.end() ? 0 : it->second.waiters.size();
}

}  // namespace mooring::async
