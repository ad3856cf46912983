#include "services/nodeagent/volumes/volume_locks.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <deque>
#include <map>

namespace mooring::nodeagent {

namespace asio = boost::asio;

namespace {
// A timer used as a one-shot condition: the holder that unlocks sets `granted` and cancels it.
struct Waiter {
  explicit Waiter(asio::any_io_executor ex) : timer(std::move(ex), asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
  bool granted = false;
};
}  // namespace

struct VolumeLocks::State {
  struct Entry {
    bool held = false;
    std::deque<std::shared_ptr<Waiter>> waiters;
  };
  explicit State(asio::any_io_executor ex) : executor(std::move(ex)) {}

  void release(const std::string& volume_id) {
    auto it = entries.find(volume_id);
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

VolumeLocks::Guard::Guard(std::shared_ptr<State> state, std::string volume_id)
    : state_(std::move(state)), volume_id_(std::move(volume_id)) {}

VolumeLocks::Guard::~Guard() { unlock(); }

VolumeLocks::Guard::Guard(Guard&& other) noexcept
    : state_(std::move(other.state_)), volume_id_(std::move(other.volume_id_)) {
  other.state_.reset();
}

VolumeLocks::Guard& VolumeLocks::Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    unlock();
    state_ = std::move(other.state_);
    volume_id_ = std::move(other.volume_id_);
    other.state_.reset();
  }
  return *this;
}

void VolumeLocks::Guard::unlock() {
  if (!state_) return;
  auto state = std::move(state_);
  state_.reset();
  state->release(volume_id_);
}

VolumeLocks::VolumeLocks(asio::any_io_executor executor) : state_(std::make_shared<State>(std::move(executor))) {}
VolumeLocks::~VolumeLocks() = default;

asio::awaitable<VolumeLocks::Guard> VolumeLocks::lock(std::string volume_id) {
  auto state = state_;
  auto& entry = state->entries[volume_id];
  if (!entry.held) {
    entry.held = true;
    co_return Guard(state, std::move(volume_id));
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
    Guard guard(state, std::move(volume_id));
    if (failure) std::rethrow_exception(failure);  // the guard passes the lock on
    co_return guard;
  }
  auto it = state->entries.find(volume_id);
  if (it != state->entries.end()) {
    auto& waiters = it->second.waiters;
    waiters.erase(std::remove(waiters.begin(), waiters.end(), waiter), waiters.end());
  }
  if (failure) std::rethrow_exception(failure);
  throw boost::system::system_error(asio::error::operation_aborted, "waiting for the volume lock");
}

bool VolumeLocks::locked(const std::string& volume_id) const {
  auto it = state_->entries.find(volume_id);
  return it != state_->entries.end() && it->second.held;
}

std::size_t VolumeLocks::waiting(const std::string& volume_id) const {
  auto it = state_->entries.find(volume_id);
  return it == state_->entries.end() ? 0 : it->second.waiters.size();
}

}  // namespace mooring::nodeagent
