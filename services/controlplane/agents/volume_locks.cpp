#include "services/controlplane/agents/volume_locks.hpp"

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

namespace mooring::controlplane::agents {

namespace asio = boost::asio;

struct VolumeLocks::Waiter {
  explicit Waiter(asio::any_io_executor ex) : timer(std::move(ex)) { timer.expires_at(asio::steady_timer::time_point::max()); }
  asio::steady_timer timer;
  bool granted = false;
};

VolumeLocks::VolumeLocks(asio::any_io_executor executor) : executor_(std::move(executor)) {}
VolumeLocks::~VolumeLocks() = default;

VolumeLocks::Guard::Guard(Guard&& other) noexcept : owner_(other.owner_), key_(std::move(other.key_)) {
  other.owner_ = nullptr;
}

VolumeLocks::Guard& VolumeLocks::Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = other.owner_;
    key_ = std::move(other.key_);
    other.owner_ = nullptr;
  }
  return *this;
}

VolumeLocks::Guard::~Guard() { reset(); }

void VolumeLocks::Guard::reset() {
  if (owner_) owner_->unlock(key_);
  owner_ = nullptr;
}

asio::awaitable<VolumeLocks::Guard> VolumeLocks::lock(std::string key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    entries_.emplace(key, Entry{});
    co_return Guard(this, std::move(key));
  }
  auto waiter = std::make_shared<Waiter>(executor_);
  it->second.waiters.push_back(waiter);
  co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  // Ownership is handed over by unlock() (granted), so it holds even if a cancellation arrived
  // at the same moment: the guard releases it on the way out.
  if (waiter->granted) co_return Guard(this, std::move(key));
  if (auto e = entries_.find(key); e != entries_.end()) {
    auto& q = e->second.waiters;
    q.erase(std::remove(q.begin(), q.end(), waiter), q.end());
  }
  throw boost::system::system_error(asio::error::operation_aborted, "waiting for the lock of " + key);
}

std::size_t VolumeLocks::waiting(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.waiters.size();
}

void VolumeLocks::unlock(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  auto& q = it->second.waiters;
  if (q.empty()) {
    entries_.erase(it);
    return;
  }
  auto next = q.front();
  q.pop_front();
  next->granted = true;
  next->timer.cancel();
}

}  // namespace mooring::controlplane::agents
